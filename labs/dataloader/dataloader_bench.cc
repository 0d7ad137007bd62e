// Lab 2 benchmark: what worker processes buy and what a batch costs to move between processes.
//
//   bazel run --config=solution //labs/dataloader:dataloader_bench
//
// 1. Throughput for CPU-bound samples (each Get does ~0.2 ms of arithmetic) with 0, 1 and 2 workers, as a
//    ratio to the in-process rate (counter "x_inprocess"): the goal is about 0.9 x workers on 2 cores.
// 2. Per-batch overhead of a 1 MiB batch through a worker (shared-memory segment create, fill, map, unlink)
//    minus the same batch made in-process: counter "overhead_us".
// Absolute numbers on a shared machine are noise; read the ratios.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

#include "labs/dataloader/loader.h"

namespace dl = distlab::dataloader;

namespace {

class CpuBound : public dl::MapDataset {
 public:
  int64_t size() const override { return 1024; }  // more than one run reads
  dl::Sample Get(int64_t i) const override {
    double x = static_cast<double>(i);
    for (int k = 0; k < 40000; ++k) x = std::sin(x) + 1.0;  // ~0.2 ms of work per sample
    return dl::Sample{{1}, {static_cast<float>(x)}};
  }
};

class Big : public dl::MapDataset {
 public:
  int64_t size() const override { return 1024; }  // more than one run reads
  dl::Sample Get(int64_t i) const override {
    return dl::Sample{{1 << 18}, std::vector<float>(1 << 18, static_cast<float>(i))};  // 1 MiB
  }
};

double g_inprocess_rate = 0;       // samples/s with num_workers = 0 (measured first)
double g_inprocess_big_us = 0;     // µs per 1 MiB batch in-process

// Runs `batches` batches through a loader; returns seconds.
double Drain(const std::shared_ptr<const dl::MapDataset>& ds, int workers, int64_t bs, int batches) {
  dl::LoaderOptions o;
  o.batch_size = bs;
  o.num_workers = workers;
  o.persistent_workers = workers > 0;
  auto loader = dl::DataLoader::Create(ds, o);
  if (!loader.ok() || !(*loader)->StartEpoch().ok()) return -1;
  dl::Batch b;
  (void)(*loader)->Next(&b);  // warm-up: workers forked and running
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) {
    if (!(*loader)->Next(&b).ok()) return -1;
    benchmark::DoNotOptimize(b.data());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_CpuBound(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  auto ds = std::make_shared<CpuBound>();
  const int64_t bs = 8;
  const int batches = 40;
  double rate = 0;
  for (auto _ : state) {
    const double s = Drain(ds, workers, bs, batches);
    if (s <= 0) {
      state.SkipWithError("loader failed");
      return;
    }
    state.SetIterationTime(s);
    rate = bs * batches / s;
  }
  if (workers == 0) g_inprocess_rate = rate;
  state.counters["samples_per_s"] = rate;
  if (g_inprocess_rate > 0) state.counters["x_inprocess"] = rate / g_inprocess_rate;
}
BENCHMARK(BM_CpuBound)->Arg(0)->Arg(1)->Arg(2)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);

void BM_OneMiBBatch(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  auto ds = std::make_shared<Big>();
  const int batches = 100;
  double us = 0;
  for (auto _ : state) {
    const double s = Drain(ds, workers, 1, batches);
    if (s <= 0) {
      state.SkipWithError("loader failed");
      return;
    }
    state.SetIterationTime(s);
    us = s / batches * 1e6;
  }
  if (workers == 0) g_inprocess_big_us = us;
  state.counters["us_per_batch"] = us;
  if (workers > 0 && g_inprocess_big_us > 0) state.counters["overhead_us"] = us - g_inprocess_big_us;
}
BENCHMARK(BM_OneMiBBatch)->Arg(0)->Arg(1)->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
