// The threads backend's built-in AllReduce (f32, sum, out of place) at 64 MiB on 2, 4 and 8 ranks, beside
// the physical bound measured in the same run -- and the gloo backend's at 4 ranks, for threads vs TCP.
//
// The bound: an all-reduce of S bytes on n ranks of one machine reads n*S and writes n*S, exactly the
// traffic of copying n*S bytes, so algbw = S/t <= B/n with B = MeasureCopyBandwidth(n*S, all cores).
// Counters (also in --benchmark_format=json):
//   algbw_GBps   S / time per AllReduce
//   B_GBps       memcpy bandwidth of all cores copying n*S bytes (same working set as the all-reduce)
//   bound_GBps   B / n
//   ratio        algbw / (B / n)     -- the goal is >= 0.5
//   best_algbw_GBps, best_ratio   the fastest AllReduce against the best B, the two measured interleaved
//                (B is a best of 3 x 5 copies); on a shared machine the mean mixes in time stolen by others
//   gloo_vs_threads_ratio (gloo row) algbw of the gloo backend / algbw of the threads backend at the same n
//                (= the busbw ratio); notes/01-collectives.md section 9 explains it
//   B_S_GBps, ratio_B_S   the same with B measured on copies of S bytes only (caches help more there)
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "reference/comm/comm.h"
#include "reference/comm/membw.h"

namespace distlab::comm {
namespace {

constexpr size_t kBytes = size_t{64} << 20;

// algbw of the threads backend per n, for the gloo rows' gloo_vs_threads_ratio (threads rows run first).
std::map<int, double>& ThreadsAlgbw() {
  static std::map<int, double> m;
  return m;
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
  // One thread drives every rank (a group); each rank's stream thread reduces its own slice.
  auto run_once = [&]() -> absl::Status {
    absl::Status s = GroupStart();
    for (int r = 0; r < n && s.ok(); ++r) {
      s = (*comms)[r]->AllReduce(send[r].data(), recv[r].data(), count, DataType::kF32, RedOp::kSum, *streams[r]);
    }
    absl::Status end = GroupEnd();
    if (s.ok()) s = end;
    for (int r = 0; r < n; ++r) {
      absl::Status synced = streams[r]->Synchronize();
      if (s.ok()) s = synced;
    }
    return s;
  };
  if (absl::Status s = run_once(); !s.ok()) {  // warm-up (first touch of every page)
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  double seconds = 0;
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = run_once();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds += t;
    best = std::min(best, t);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
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

// {ranks, backend}: threads at 2, 4, 8; the gloo backend at 4 (its ranks are threads here too, each with
// its own Gloo context over TCP loopback -- the transport of ./labctl launch -n 4, without the processes).
BENCHMARK(BM_AllReduceF32Sum)->Args({2, 0})->Args({4, 0})->Args({8, 0})->Args({4, 1})->UseRealTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace distlab::comm

BENCHMARK_MAIN();
