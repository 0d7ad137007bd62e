// The threads backend's built-in AllReduce (f32, sum, out of place) at 64 MiB on 2, 4 and 8 ranks, beside
// the physical bound measured in the same run -- and the gloo backend's at 4 ranks, for threads vs TCP.
//
// The bound: an all-reduce of S bytes on n ranks of one machine reads n*S and writes n*S, exactly the
// traffic of copying n*S bytes, so algbw = S/t <= B/n with B = MeasureCopyBandwidth(n*S, all cores).
// Counters (also in --benchmark_format=json):
//   algbw_GBps   S / time per AllReduce
//   B_GBps       memcpy bandwidth of all cores copying n*S bytes (same working set as the all-reduce)
//   bound_GBps   B / n
//   ratio        algbw / (B / n): the mean AllReduce against the best B
//   best_algbw_GBps, best_ratio   the fastest AllReduce against the best B, the two measured interleaved
//                (B is a best of 3 x 5 copies); on a shared machine the mean mixes in time stolen by others
//   paired_ratio (threads rows) the headline, goal >= 0.8: 21 pairs of one AllReduce and one copy of its
//                traffic (each rank's input to its output on all cores, TimeCopy) back to back, the order
//                alternating; within a pair t_copy / t_allreduce = algbw / (B/n), and this is the median
//                over pairs. On a shared VM the memory bandwidth itself drifts by 20-40 % between seconds,
//                so `ratio` divides a mean by a bound taken at the machine's best moment on other pages;
//                a pair sees one machine and the same pages.
//   paired_B_GBps  the median B of those copies
//   paired_ratio_n_threads  the same pairs with the copy on min(n, cores) threads, the AllReduce's own
//                thread count: on a machine with more cores than ranks, it tells the thread count's share of
//                a low paired_ratio from the loops' share
//   gloo_vs_threads_ratio (gloo row) algbw of the gloo backend / algbw of the threads backend at the same n
//                (= the busbw ratio); notes/01-collectives.md section 9 explains it
//   B_S_GBps, ratio_B_S   the same with B measured on copies of S bytes only (caches help more there)
//
// BM_GlooBackendVsRawGloo/4: the gloo backend's AllReduce beside Gloo's own gloo::allreduce on the same
// buffers and the same 4 threads-as-ranks (each raw rank its own Gloo context over TCP loopback, Gloo's ring
// algorithm and its gloo::sum<float>; no descriptor exchange, no stream thread), timed alternately, one of
// each per iteration, so both see the same load. Counters:
//   backend_algbw_GBps, raw_algbw_GBps   S / mean time
//   ratio          backend algbw / raw Gloo algbw (mean times) -- the goal is >= 0.9
//   median_ratio   the median over iterations of raw time / backend time (each pair measured back to back)
//   best_ratio     fastest raw / fastest backend
//   fixed_extra_us the backend's extra time per call at 4 KiB (median of backend - raw over 50 pairs):
//                  what it adds whatever the size -- the 5-number call-descriptor all-gather and the
//                  stream hand-off
//   fixed_share    fixed_extra_us / the mean 64 MiB backend call: the part of the gap that per-call cost
//                  explains
//
// Where the threads backend's time goes at 8 ranks on 2 cores. A trace of this benchmark
// (DISTLAB_TRACE=FILE comm_bench --benchmark_filter='BM_AllReduceF32Sum/8/0') shows the 8 stream threads of
// one AllReduce starting within 0.1-3.3 ms of each other (median 1.2 ms) in calls of 170-410 ms (at a load
// average of about 12), so the launch rendezvous costs under 2 %. In pairs, the 8-rank AllReduce runs at
// the same fraction of the copy of its traffic as the 2- and 4-rank ones (paired_ratio median 0.95 over six
// runs on an idle 2-core VM, where `ratio` read 0.45-0.94): 8 rank threads sharing 2 cores take chunks
// from one counter and lose little; what `ratio` lost was the bound's drift (notes/01 section 6).
// Those runs had the reduction loop of the time, an L2 accumulator filled and then streamed out. Pinned to
// one core (taskset -c 0), where one thread's overlap of reads and writes decides, that loop read 0.57-0.72;
// the one-pass loop (ReduceToOutputs) reads 0.72-1.29 there and 1.13-1.25 on two cores.
//
// The same benchmark on the nccl backend (`--backend=nccl` or DISTLAB_BACKEND=nccl; built in wherever the
// CUDA toolkit was found, which loads the CUDA runtime and NCCL for these rows only): one rank per GPU on 1,
// 2, 4 and 8 ranks (those above the GPUs found are skipped, naming both numbers), buffers from cudaMalloc,
// timed with the host clock around a synchronized AllReduce, as nccl-tests' all_reduce_perf times it (put
// `all_reduce_perf -b 64M -e 64M -g <n>` beside it). Counters:
//   algbw_GBps, best_algbw_GBps   S / time (mean, best)
//   busbw_GBps    algbw * 2(n-1)/n, nccl-tests' bus bandwidth (0 for one rank, as there)
//   memcpy_GBps   cudaMemcpyAsync device-to-device of S bytes on GPU 0: S / time, the device baseline
//   ratio         algbw / memcpy_GBps (one rank: NCCL's copy against a plain device copy)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#ifdef DISTLAB_WITH_NCCL
#include <cuda_runtime.h>

#include "reference/comm/cuda_dl.h"
#endif

#include "benchmark/benchmark.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "reference/comm/comm.h"
#include "reference/comm/membw.h"
#include "tools/bench/ratio.h"

namespace distlab::comm {
namespace {

constexpr size_t kBytes = size_t{64} << 20;
// AllReduce/copy pairs timed per threads row for paired_ratio.
constexpr int kPairs = 21;

// algbw of the threads backend per n, for the gloo rows' gloo_vs_threads_ratio (threads rows run first).
std::map<int, double>& ThreadsAlgbw() {
  static std::map<int, double> m;
  return m;
}

// One thread drives every rank: an AllReduce (f32, sum) of `count` floats per rank in one group, then every
// stream synchronized; the first error.
absl::Status GroupedAllReduce(std::vector<std::unique_ptr<Comm>>& comms,
                              std::vector<std::unique_ptr<Stream>>& streams,
                              const std::vector<const void*>& send, const std::vector<void*>& recv,
                              size_t count) {
  const int n = static_cast<int>(comms.size());
  absl::Status s = GroupStart();
  for (int r = 0; r < n && s.ok(); ++r) {
    s = comms[r]->AllReduce(send[r], recv[r], count, DataType::kF32, RedOp::kSum, *streams[r]);
  }
  absl::Status end = GroupEnd();
  if (s.ok()) s = end;
  for (int r = 0; r < n; ++r) {
    absl::Status synced = streams[r]->Synchronize();
    if (s.ok()) s = synced;
  }
  return s;
}

// Runs f once; *seconds = how long it took.
absl::Status Timed(const std::function<absl::Status()>& f, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = f();
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

// The median of v (the upper one of an even count), sorting v. v is not empty.
double Median(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `warmups` untimed calls, then one timed call per benchmark iteration: the total and the fastest time in
// seconds. False (the benchmark marked with the error) when a call fails.
bool TimeCalls(benchmark::State& state, int warmups, const std::function<absl::Status()>& run_once,
               double* seconds, double* best) {
  for (int i = 0; i < warmups; ++i) {
    if (absl::Status s = run_once(); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return false;
    }
  }
  *seconds = 0;
  *best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = run_once();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *seconds += t;
    *best = std::min(*best, t);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return false;
    }
  }
  return true;
}

void BM_AllReduceF32Sum(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Backend backend = state.range(1) == 0 ? Backend::kThreads : Backend::kGloo;
  state.SetLabel(backend == Backend::kThreads ? "threads" : "gloo (TCP loopback)");
  const size_t count = kBytes / sizeof(float);
  auto comms = CommInitAll(n, CommOptions{backend, std::chrono::seconds(120), "bench"});
  if (!comms.ok()) {
    state.SkipWithError(std::string(comms.status().message()).c_str());
    return;
  }
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::vector<float>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    streams.push_back(std::make_unique<Stream>());
    send[r].assign(count, 1.0f + r);
    recv[r].assign(count, 0.0f);
  }
  std::vector<const void*> send_ptrs(n);
  std::vector<void*> recv_ptrs(n);
  for (int r = 0; r < n; ++r) send_ptrs[r] = send[r].data(), recv_ptrs[r] = recv[r].data();
  // Each rank's stream thread reduces its own slice; the first call touches every page (warm-up).
  auto run_once = [&] { return GroupedAllReduce(*comms, streams, send_ptrs, recv_ptrs, count); };
  double seconds = 0, best = 0;
  if (!TimeCalls(state, 1, run_once, &seconds, &best)) return;
  const float want = n * (n + 1) / 2.0f;
  if (recv[0][0] != want || recv[n - 1][count - 1] != want) state.SkipWithError("wrong AllReduce result");
  const double algbw = static_cast<double>(kBytes) * state.iterations() / seconds;
  // The bound, interleaved with more timed AllReduces so both see the same load on a shared machine.
  double b = 0;
  for (int round = 0; round < 3; ++round) {
    b = std::max(b, MeasureCopyBandwidth(kBytes * n, HardwareThreads()));
    const auto t0 = std::chrono::steady_clock::now();
    if (!run_once().ok()) break;
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double b_s = MeasureCopyBandwidth(kBytes, HardwareThreads());
  if (backend == Backend::kThreads) {
    // Pairs: one AllReduce and one copy of its traffic back to back, the order alternating. The copy is
    // every rank's input to its output (n*S read, n*S written, on all cores): the AllReduce's own pages.
    // t_copy / t_allreduce = algbw / (B/n) within a pair; the median over pairs.
    // Each pair also times the same copy on min(n, cores) threads, as many as the AllReduce has (its n rank
    // threads): paired_ratio_n_threads. Where it is near 1 but paired_ratio is not, n threads cannot draw
    // the machine's bandwidth and the gap is the thread count, not the AllReduce's loops.
    const int n_threads = std::min(n, HardwareThreads());
    std::vector<double> pair_ratios, pair_b, pair_ratios_n;
    for (int i = 0; i < kPairs; ++i) {
      double t_ar = 0, t_copy = 0, t_copy_n = 0;
      if (i % 2 == 0) {
        if (!Timed(run_once, &t_ar).ok()) break;
        t_copy = TimeCopy(send_ptrs, recv_ptrs, kBytes, HardwareThreads());
        t_copy_n = TimeCopy(send_ptrs, recv_ptrs, kBytes, n_threads);
      } else {
        t_copy_n = TimeCopy(send_ptrs, recv_ptrs, kBytes, n_threads);
        t_copy = TimeCopy(send_ptrs, recv_ptrs, kBytes, HardwareThreads());
        if (!Timed(run_once, &t_ar).ok()) break;
      }
      pair_ratios.push_back(t_copy / t_ar);
      pair_ratios_n.push_back(t_copy_n / t_ar);
      pair_b.push_back(static_cast<double>(kBytes) * n / t_copy);
    }
    if (!pair_ratios.empty()) {
      state.counters["paired_ratio"] = Median(pair_ratios);
      state.counters["paired_ratio_n_threads"] = Median(pair_ratios_n);
      state.counters["paired_B_GBps"] = Median(pair_b) / 1e9;
    }
  }
  const double best_algbw = static_cast<double>(kBytes) / best;
  state.counters["algbw_GBps"] = algbw / 1e9;
  state.counters["best_algbw_GBps"] = best_algbw / 1e9;
  state.counters["best_ratio"] = best_algbw / (b / n);
  state.counters["B_GBps"] = b / 1e9;
  state.counters["bound_GBps"] = b / n / 1e9;
  state.counters["ratio"] = algbw / (b / n);
  state.counters["B_S_GBps"] = b_s / 1e9;
  state.counters["ratio_B_S"] = algbw / (b_s / n);
  state.counters["ranks"] = n;
  if (backend == Backend::kThreads) {
    ThreadsAlgbw()[n] = algbw;
  } else if (ThreadsAlgbw().count(n) > 0) {
    // busbw ratio = algbw ratio (same n, same collective).
    state.counters["gloo_vs_threads_ratio"] = algbw / ThreadsAlgbw()[n];
  }
  state.SetBytesProcessed(static_cast<int64_t>(kBytes) * state.iterations());
  for (auto& c : *comms) (void)c->Destroy();
}

// Gloo's own all-reduce on n threads of this process: one Gloo context per rank over TCP loopback, met
// through an in-process HashStore -- the gloo backend's transport without the backend.
class RawGloo {
 public:
  static absl::StatusOr<std::unique_ptr<RawGloo>> Create(int n) {
    auto g = std::unique_ptr<RawGloo>(new RawGloo());
    g->ctx_.resize(n);
    gloo::rendezvous::HashStore store;
    std::vector<std::string> errors(n);
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        try {
          gloo::transport::tcp::attr attr;
          attr.hostname = "127.0.0.1";
          auto device = gloo::transport::tcp::CreateDevice(attr);
          auto ctx = std::make_shared<gloo::rendezvous::Context>(r, n);
          ctx->setTimeout(std::chrono::seconds(120));
          ctx->connectFullMesh(store, device);
          g->ctx_[r] = ctx;
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r) {
      if (!errors[r].empty()) {
        return absl::UnavailableError("raw Gloo: rank " + std::to_string(r) +
                                      " could not connect: " + errors[r]);
      }
    }
    return g;
  }
  // One gloo::allreduce (f32, sum) per rank, each rank on its own thread.
  absl::Status AllReduce(const std::vector<const void*>& send, const std::vector<void*>& recv, size_t count) {
    const int n = static_cast<int>(ctx_.size());
    const uint32_t tag = next_tag_++;
    std::vector<std::string> errors(n);
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        try {
          gloo::AllreduceOptions o(ctx_[r]);
          o.setInput(static_cast<float*>(const_cast<void*>(send[r])), count);
          o.setOutput(static_cast<float*>(recv[r]), count);
          o.setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          o.setTag(tag);
          gloo::allreduce(o);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r) {
      if (!errors[r].empty())
        return absl::InternalError("raw Gloo all-reduce, rank " + std::to_string(r) + ": " + errors[r]);
    }
    return absl::OkStatus();
  }

 private:
  RawGloo() = default;
  std::vector<std::shared_ptr<gloo::Context>> ctx_;
  uint32_t next_tag_ = 1;
};

void BM_GlooBackendVsRawGloo(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  state.SetLabel("gloo backend vs gloo::allreduce, TCP loopback");
  const size_t count = kBytes / sizeof(float);
  auto comms = CommInitAll(n, CommOptions{Backend::kGloo, std::chrono::seconds(120), "bench"});
  if (!comms.ok()) {
    state.SkipWithError(std::string(comms.status().message()).c_str());
    return;
  }
  absl::StatusOr<std::unique_ptr<RawGloo>> raw = RawGloo::Create(n);
  if (!raw.ok()) {
    state.SkipWithError(std::string(raw.status().message()).c_str());
    return;
  }
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::vector<float>> send(n), recv(n);
  std::vector<const void*> send_ptrs(n);
  std::vector<void*> recv_ptrs(n);
  for (int r = 0; r < n; ++r) {
    streams.push_back(std::make_unique<Stream>());
    send[r].assign(count, 1.0f + r);
    recv[r].assign(count, 0.0f);
    send_ptrs[r] = send[r].data(), recv_ptrs[r] = recv[r].data();
  }
  const float want = n * (n + 1) / 2.0f;
  size_t cur = count;  // the elements of the call being timed
  auto backend_once = [&] { return GroupedAllReduce(*comms, streams, send_ptrs, recv_ptrs, cur); };
  auto raw_once = [&] { return (*raw)->AllReduce(send_ptrs, recv_ptrs, cur); };
  double t = 0;
  for (const std::function<absl::Status()>& f :
       {std::function<absl::Status()>(backend_once), std::function<absl::Status()>(raw_once)}) {  // warm-up
    if (absl::Status s = Timed(f, &t); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  double sum_backend = 0, sum_raw = 0, best_backend = 1e30, best_raw = 1e30;
  std::vector<double> pair_ratios;
  for (auto _ : state) {
    double tb = 0, tr = 0;
    absl::Status s = Timed(backend_once, &tb);
    if (s.ok() && (recv[0][0] != want || recv[n - 1][count - 1] != want))
      s = absl::InternalError("backend: wrong sum");
    if (s.ok()) s = Timed(raw_once, &tr);
    if (s.ok() && (recv[0][0] != want || recv[n - 1][count - 1] != want))
      s = absl::InternalError("raw Gloo: wrong sum");
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    state.SetIterationTime(tb + tr);
    sum_backend += tb, sum_raw += tr;
    best_backend = std::min(best_backend, tb), best_raw = std::min(best_raw, tr);
    pair_ratios.push_back(tr / tb);
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["backend_algbw_GBps"] = kBytes * iters / sum_backend / 1e9;
  state.counters["raw_algbw_GBps"] = kBytes * iters / sum_raw / 1e9;
  state.counters["ratio"] = sum_raw / sum_backend;
  state.counters["median_ratio"] = Median(pair_ratios);
  state.counters["best_ratio"] = best_raw / best_backend;
  state.counters["ranks"] = n;

  // What the backend adds per call, whatever the size (the call-descriptor all-gather that catches
  // mismatched calls, the hand-off to the rank's stream thread and back): the same pairs at 4 KiB, where the
  // bytes cost almost nothing, the median of backend time - raw time.
  cur = 1024;
  std::vector<double> extra;
  for (int i = 0; i < 60; ++i) {
    double tb = 0, tr = 0;
    absl::Status s = Timed(backend_once, &tb);
    if (s.ok()) s = Timed(raw_once, &tr);
    if (!s.ok() || recv[n - 1][cur - 1] != want) break;
    if (i >= 10) extra.push_back(tb - tr);  // the first ten warm the small path up
  }
  if (!extra.empty()) {
    const double fixed_s = Median(extra);
    state.counters["fixed_extra_us"] = fixed_s * 1e6;
    // The share of the mean 64 MiB backend call that this fixed cost explains.
    state.counters["fixed_share"] = fixed_s / (sum_backend / iters);
  }
  for (auto& c : *comms) (void)c->Destroy();
}

DISTLAB_BENCH_RATIO(BM_AllReduceF32Sum, "paired_ratio",
                    {"threads backend AllReduce algbw / (B/n): 64 MiB f32 sum, median over pairs of one "
                     "AllReduce and one copy of its n*S bytes timed back to back (t_copy / t_allreduce)",
                     "B/n, B = memcpy bandwidth of all cores copying n*S bytes, measured in each pair",
                     "paired_B_GBps", 0.8});

DISTLAB_BENCH_RATIO(
    BM_GlooBackendVsRawGloo, "ratio",
    {"gloo backend AllReduce algbw / gloo::allreduce algbw: 64 MiB f32 sum, 4 ranks, same buffers, "
     "one of each per iteration",
     "Gloo's own ring all-reduce on the same threads-as-ranks over TCP loopback", "raw_algbw_GBps", 0.9});

#ifdef DISTLAB_WITH_NCCL
// cudaMalloc'd buffers of one rank, freed at the end.
struct DeviceBuffers {
  int device = 0;
  float* send = nullptr;
  float* recv = nullptr;
  ~DeviceBuffers() {
    const cuda_dl::Api& cu = cuda_dl::Loaded();
    cu.cudaSetDevice(device);
    cu.cudaFree(send);
    cu.cudaFree(recv);
  }
};

// Device-to-device copy bandwidth of `bytes` on `device`: bytes / time of one cudaMemcpyAsync (best of 20).
double DeviceCopyBandwidth(int device, size_t bytes) {
  const cuda_dl::Api& cu = cuda_dl::Loaded();
  cu.cudaSetDevice(device);
  void *a = nullptr, *b = nullptr;
  if (cu.cudaMalloc(&a, bytes) != cudaSuccess || cu.cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaEvent_t start, stop;
  cu.cudaEventCreate(&start);
  cu.cudaEventCreate(&stop);
  float best_ms = 1e30f;
  for (int i = 0; i < 21; ++i) {
    cu.cudaEventRecord(start, 0);
    cu.cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
    cu.cudaEventRecord(stop, 0);
    cu.cudaEventSynchronize(stop);
    float ms = 0;
    cu.cudaEventElapsedTime(&ms, start, stop);
    if (i > 0) best_ms = std::min(best_ms, ms);  // the first one warms up
  }
  cu.cudaEventDestroy(start);
  cu.cudaEventDestroy(stop);
  cu.cudaFree(a);
  cu.cudaFree(b);
  return static_cast<double>(bytes) / (best_ms / 1e3);
}

void BM_NcclAllReduceF32Sum(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const size_t count = kBytes / sizeof(float);
  // The CUDA runtime and NCCL are loaded now, not when the program starts (cuda_dl.h).
  auto loaded = cuda_dl::Load();
  if (!loaded.ok()) {
    state.SkipWithError(std::string(loaded.status().message()).c_str());
    return;
  }
  const cuda_dl::Api& cu = **loaded;
  int found = 0;
  if (cu.cudaGetDeviceCount(&found) != cudaSuccess) found = 0;
  if (found < n) {
    state.SkipWithError(
        ("needs " + std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + ", found " + std::to_string(found))
            .c_str());
    return;
  }
  auto comms = CommInitAll(n, CommOptions{Backend::kNccl, std::chrono::seconds(120), "bench"});
  if (!comms.ok()) {
    state.SkipWithError(std::string(comms.status().message()).c_str());
    return;
  }
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<DeviceBuffers> buffers(n);
  for (int r = 0; r < n; ++r) {
    streams.push_back(std::make_unique<Stream>());
    buffers[r].device = r;
    cu.cudaSetDevice(r);
    if (cu.cudaMalloc(reinterpret_cast<void**>(&buffers[r].send), kBytes) != cudaSuccess ||
        cu.cudaMalloc(reinterpret_cast<void**>(&buffers[r].recv), kBytes) != cudaSuccess) {
      state.SkipWithError("cudaMalloc of the benchmark buffers failed");
      return;
    }
    std::vector<float> host(count, 1.0f + r);
    cu.cudaMemcpy(buffers[r].send, host.data(), kBytes, cudaMemcpyHostToDevice);
  }
  std::vector<const void*> send_ptrs(n);
  std::vector<void*> recv_ptrs(n);
  for (int r = 0; r < n; ++r) send_ptrs[r] = buffers[r].send, recv_ptrs[r] = buffers[r].recv;
  // One thread drives every rank (a group), as nccl-tests does with -g n; 5 warm-up calls (NCCL sets up its
  // channels on the first ones).
  auto run_once = [&] { return GroupedAllReduce(*comms, streams, send_ptrs, recv_ptrs, count); };
  double seconds = 0, best = 0;
  if (!TimeCalls(state, 5, run_once, &seconds, &best)) return;
  std::vector<float> check(count);
  cu.cudaSetDevice(n - 1);
  cu.cudaMemcpy(check.data(), buffers[n - 1].recv, kBytes, cudaMemcpyDeviceToHost);
  const float want = n * (n + 1) / 2.0f;
  if (check[0] != want || check[count - 1] != want) state.SkipWithError("wrong AllReduce result");
  const double algbw = static_cast<double>(kBytes) * state.iterations() / seconds;
  const double memcpy_bw = DeviceCopyBandwidth(0, kBytes);
  state.counters["algbw_GBps"] = algbw / 1e9;
  state.counters["best_algbw_GBps"] = kBytes / best / 1e9;
  state.counters["busbw_GBps"] = algbw * 2.0 * (n - 1) / n / 1e9;
  state.counters["memcpy_GBps"] = memcpy_bw / 1e9;
  state.counters["ratio"] = memcpy_bw > 0 ? algbw / memcpy_bw : 0.0;
  state.counters["ranks"] = n;
  state.SetBytesProcessed(static_cast<int64_t>(kBytes) * state.iterations());
  for (auto& c : *comms) (void)c->Destroy();
}
#endif  // DISTLAB_WITH_NCCL

}  // namespace
}  // namespace distlab::comm

// --backend=threads|gloo|nccl (or DISTLAB_BACKEND, comm::BackendFromEnv: gloo when unset; threads and gloo
// give the same rows); every other flag goes to Google Benchmark.
int main(int argc, char** argv) {
  namespace comm = distlab::comm;
  absl::StatusOr<comm::Backend> backend = comm::BackendFromEnv();
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--backend=", 0) == 0) {
      backend = comm::ParseBackend(a.substr(10));
    } else {
      args.push_back(argv[i]);
    }
  }
  if (!backend.ok()) {
    std::fprintf(stderr, "comm_bench: %s\n", std::string(backend.status().message()).c_str());
    return 2;
  }
  int nargs = static_cast<int>(args.size());
  benchmark::Initialize(&nargs, args.data());
  if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 1;
  if (*backend == comm::Backend::kThreads || *backend == comm::Backend::kGloo) {
    // {ranks, backend}: threads at 2, 4, 8; the gloo backend at 4 (its ranks are threads here too, each with
    // its own Gloo context over TCP loopback -- the transport of ./labctl launch -n 4, without the
    // processes).
    benchmark::RegisterBenchmark("BM_AllReduceF32Sum", distlab::comm::BM_AllReduceF32Sum)
        ->Args({2, 0})
        ->Args({4, 0})
        ->Args({8, 0})
        ->Args({4, 1})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0);
    benchmark::RegisterBenchmark("BM_GlooBackendVsRawGloo", distlab::comm::BM_GlooBackendVsRawGloo)
        ->Arg(4)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0);
  } else {
#ifdef DISTLAB_WITH_NCCL
    benchmark::RegisterBenchmark("BM_NcclAllReduceF32Sum", distlab::comm::BM_NcclAllReduceF32Sum)
        ->Arg(1)
        ->Arg(2)
        ->Arg(4)
        ->Arg(8)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0);
#else
    std::fprintf(stderr,
                 "comm_bench: the nccl backend is not built into this binary (the CUDA toolkit "
                 "was not found when the build was configured)\n");
    return 2;
#endif
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
