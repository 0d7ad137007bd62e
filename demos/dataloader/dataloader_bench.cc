// Lab 2 benchmark: what worker processes buy and what a batch costs to move between processes.
//
//   bazel run --config=solution //demos/dataloader:dataloader_bench
//
// 1. BM_Throughput: CPU-bound samples (each Get does ~1 ms of arithmetic, a batch of 8 about 8 ms, so the
//    tens of microseconds a batch costs to move are under 1 %) read with 0, 1 and 2 workers. Every round runs
//    the three back to back and the best round of each counts, so a burst of load from other processes hurts
//    all three alike. Counters: w1_ratio, w2_ratio = samples/s with W workers over the in-process rate (goal
//    0.9 x W); w2_goal_frac = w2_ratio / 1.8 (>= 1 meets it). cpu_ms_per_batch_wW = CPU time of all
//    processes per batch; cpus_wW = CPU-seconds used per wall second, i.e. the cores the machine actually
//    gave the run. w2_ratio = w2_cpus_ratio / w2_cpu_cost_ratio: two workers can only be faster by as much
//    more CPU as they get, and lose what the trip through the workers costs in CPU.
// 2. BM_OneMiBBatch: 1 MiB batches (batch size 1). Per-batch time of Next(), median over all batches of all
//    rounds: in-process (Get + collate) and through one worker with prefetch_factor 1, so nothing overlaps
//    and the whole cost of the trip is exposed (wake the worker, Get, copy into shared memory, message, wake
//    the main process). overhead_us = worker - in-process (goal <= 50 us; overhead_goal_frac = overhead/50);
//    pipelined_us: the same with the default prefetch, where the worker runs ahead.
// 3. BM_SegmentCost: why the loader reuses segments -- writing 1 MiB into a new segment each time (shm_open,
//    ftruncate, mmap, page faults, munmap, unlink) against writing it into one that stays mapped.
// Absolute numbers on a shared machine are noise; read the ratios, and the load average in the header.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "labs/dataloader/loader.h"
#include "tools/bench/ratio.h"

namespace dl = distlab::dataloader;

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// CPU time (user + system) of this process and of its reaped children.
double CpuSeconds() {
  double s = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    getrusage(who, &u);
    s += u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  }
  return s;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

class CpuBound : public dl::MapDataset {
 public:
  explicit CpuBound(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  dl::Sample Get(int64_t i) const override {
    double x = static_cast<double>(i);
    for (int k = 0; k < 40000; ++k) x = std::sin(x) + 1.0;  // ~1 ms of arithmetic, no memory traffic
    return dl::Sample{{1}, {static_cast<float>(x)}};
  }

 private:
  int64_t n_;
};

class Big : public dl::MapDataset {
 public:
  explicit Big(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  dl::Sample Get(int64_t i) const override {
    return dl::Sample{{1 << 18}, std::vector<float>(1 << 18, static_cast<float>(i))};  // 1 MiB
  }

 private:
  int64_t n_;
};

struct EpochTimes {
  bool ok = false;
  double steady_s = 0;              // wall time after the first batch (workers forked and running)
  double cpu_s = 0;                 // CPU of every process, the whole epoch (workers are reaped at the end)
  std::vector<double> per_batch_s;  // each Next() after the first
};

// Reads one whole epoch; the loader (and its workers) are gone when this returns.
EpochTimes Epoch(const std::shared_ptr<const dl::MapDataset>& ds, int workers, int64_t bs, int prefetch) {
  EpochTimes t;
  const double cpu0 = CpuSeconds();
  {
    dl::LoaderOptions o;
    o.batch_size = bs;
    o.num_workers = workers;
    o.prefetch_factor = prefetch;
    auto loader = dl::DataLoader::Create(ds, o);
    if (!loader.ok() || !(*loader)->StartEpoch().ok()) return t;
    dl::Batch b;
    auto first = (*loader)->Next(&b);
    if (!first.ok() || !*first) return t;
    const auto t0 = Clock::now();
    for (;;) {
      const auto s = Clock::now();
      auto more = (*loader)->Next(&b);
      if (!more.ok()) return t;
      if (!*more) break;
      benchmark::DoNotOptimize(b.data());
      t.per_batch_s.push_back(Seconds(Clock::now() - s));
    }
    t.steady_s = Seconds(Clock::now() - t0);
  }
  t.cpu_s = CpuSeconds() - cpu0;
  t.ok = true;
  return t;
}

void BM_Throughput(benchmark::State& state) {
  constexpr int64_t kBatch = 8, kBatches = 41;  // the first one is the warm-up
  auto ds = std::make_shared<CpuBound>(kBatch * kBatches);
  (void)Epoch(ds, 0, kBatch, 2);  // warm caches and clocks before the first timed round
  double best[3] = {1e30, 1e30, 1e30}, cpu[3] = {0, 0, 0};
  for (auto _ : state) {
    double round = 0;
    for (int w = 0; w < 3; ++w) {
      EpochTimes t = Epoch(ds, w, kBatch, 2);
      if (!t.ok) {
        state.SkipWithError("loader failed");
        return;
      }
      round += t.steady_s;
      if (t.steady_s < best[w]) {
        best[w] = t.steady_s;
        cpu[w] = t.cpu_s;
      }
    }
    state.SetIterationTime(round);
  }
  double cpus[3];
  for (int w = 0; w < 3; ++w) {
    cpus[w] = cpu[w] / (best[w] * kBatches / (kBatches - 1));  // CPU-seconds per wall second
    state.counters["cpus_w" + std::to_string(w)] = cpus[w];
    state.counters["cpu_ms_per_batch_w" + std::to_string(w)] = 1e3 * cpu[w] / kBatches;
  }
  state.counters["w1_ratio"] = best[0] / best[1];
  state.counters["w2_ratio"] = best[0] / best[2];
  state.counters["w2_goal_frac"] = best[0] / best[2] / 1.8;
  // w2_ratio = w2_cpus_ratio / w2_cpu_cost_ratio: how much more CPU the machine gave the run with two
  // workers, over how much more CPU a batch cost through them.
  state.counters["w2_cpus_ratio"] = cpus[2] / cpus[0];
  state.counters["w2_cpu_cost_ratio"] = cpu[2] / cpu[0];
}
BENCHMARK(BM_Throughput)->UseManualTime()->Iterations(4)->Unit(benchmark::kMillisecond);

void BM_OneMiBBatch(benchmark::State& state) {
  constexpr int64_t kBatches = 101;
  auto ds = std::make_shared<Big>(kBatches);
  (void)Epoch(ds, 0, 1, 1);
  std::vector<double> inproc, worker, pipelined;
  for (auto _ : state) {
    double round = 0;
    for (int k = 0; k < 3; ++k) {
      EpochTimes t = Epoch(ds, k == 0 ? 0 : 1, 1, k == 2 ? 2 : 1);
      if (!t.ok) {
        state.SkipWithError("loader failed");
        return;
      }
      round += t.steady_s;
      auto& into = k == 0 ? inproc : k == 1 ? worker : pipelined;
      into.insert(into.end(), t.per_batch_s.begin(), t.per_batch_s.end());
    }
    state.SetIterationTime(round);
  }
  const double in_us = 1e6 * Median(inproc), w_us = 1e6 * Median(worker);
  state.counters["inprocess_us"] = in_us;
  state.counters["worker_us"] = w_us;
  state.counters["pipelined_us"] = 1e6 * Median(pipelined);
  state.counters["overhead_us"] = w_us - in_us;
  state.counters["overhead_goal_frac"] = (w_us - in_us) / 50.0;
}
BENCHMARK(BM_OneMiBBatch)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

// 1 MiB written into a new segment each time vs. into one that stays mapped.
void BM_SegmentCost(benchmark::State& state) {
  constexpr size_t kBytes = size_t{1} << 20;
  const std::string name = "/distlab_bench_seg_" + std::to_string(::getpid());
  std::vector<char> src(kBytes, 1);
  auto fresh = [&]() -> bool {
    int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return false;
    bool ok = ::ftruncate(fd, kBytes) == 0;
    void* p = ok ? ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    ::shm_unlink(name.c_str());
    if (p == MAP_FAILED) return false;
    std::memcpy(p, src.data(), kBytes);
    benchmark::ClobberMemory();
    ::munmap(p, kBytes);
    return true;
  };
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  void* kept = MAP_FAILED;
  if (fd >= 0 && ::ftruncate(fd, kBytes) == 0)
    kept = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) ::close(fd);
  ::shm_unlink(name.c_str());
  if (kept == MAP_FAILED) {
    state.SkipWithError("shared memory unavailable");
    return;
  }
  std::memcpy(kept, src.data(), kBytes);  // its pages exist from now on
  std::vector<double> f, r;
  for (auto _ : state) {
    auto s = Clock::now();
    if (!fresh()) {
      state.SkipWithError("shm_open failed");
      break;
    }
    f.push_back(Seconds(Clock::now() - s));
    s = Clock::now();
    std::memcpy(kept, src.data(), kBytes);
    benchmark::ClobberMemory();
    r.push_back(Seconds(Clock::now() - s));
  }
  ::munmap(kept, kBytes);
  state.counters["fresh_us"] = 1e6 * Median(f);
  state.counters["reused_us"] = 1e6 * Median(r);
  state.counters["fresh_over_reused_ratio"] = Median(f) / std::max(1e-9, Median(r));
}
BENCHMARK(BM_SegmentCost)->Iterations(200)->Unit(benchmark::kMicrosecond);

}  // namespace

DISTLAB_BENCH_RATIO(BM_Throughput, "w1_ratio",
                    {"samples/s with 1 worker process over samples/s in the main process",
                     "the in-process rate (the goal is 0.9 per worker)", "", 0.9});
DISTLAB_BENCH_RATIO(BM_Throughput, "w2_ratio",
                    {"samples/s with 2 worker processes over samples/s in the main process",
                     "the in-process rate (the goal is 0.9 per worker)", "", 1.8});
DISTLAB_BENCH_RATIO(BM_Throughput, "w2_goal_frac",
                    {"w2_ratio / 1.8", "the goal 1.8 = 0.9 x 2 workers", "", 1.0});
DISTLAB_BENCH_RATIO(BM_Throughput, "w2_cpus_ratio",
                    {"CPU-seconds per wall second with 2 workers over in-process",
                     "the cores the in-process run got"});
DISTLAB_BENCH_RATIO(BM_Throughput, "w2_cpu_cost_ratio",
                    {"CPU time per batch with 2 workers over in-process", "the in-process CPU cost", "", 0,
                     false});
DISTLAB_BENCH_RATIO(BM_OneMiBBatch, "overhead_goal_frac",
                    {"(worker - in-process) time per 1 MiB batch over 50 us", "the 50 us goal", "", 1.0,
                     false});
DISTLAB_BENCH_RATIO(BM_SegmentCost, "fresh_over_reused_ratio",
                    {"time to write 1 MiB into a new shared-memory segment over into a mapped one",
                     "the reused segment's time", "reused_us", 0, false});

BENCHMARK_MAIN();
