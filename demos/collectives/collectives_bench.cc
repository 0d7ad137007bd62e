// Lab 1 benchmark: the ring all-reduce (stage B) beside the runtime's built-in at 64 MiB on 2, 4 and 8
// ranks, each as a fraction of the shared-memory bound B/n measured in the same run.
//
//   bazel run --config=solution //demos/collectives:collectives_bench -- --benchmark_format=json
//
// Counters: algbw and busbw (GB/s), bound = B/n (GB/s, B = memcpy bandwidth of all cores at 64 MiB) and
// frac_of_bound = algbw / bound. Absolute numbers on a shared 2-core machine are noise; read the ratios.
#include <benchmark/benchmark.h>

#include "labs/collectives/bandwidth.h"
#include "labs/collectives/harness.h"
#include "reference/comm/membw.h"
#include "tools/bench/ratio.h"

namespace distlab::collectives {
namespace {

constexpr size_t kBytes = size_t{64} << 20;

double CopyBandwidthGbps() {
  static const double b = comm::MeasureCopyBandwidth(kBytes, comm::HardwareThreads()) / 1e9;
  return b;
}

void BM_AllReduce64MiB(benchmark::State& state, Algorithm algorithm) {
  PerfOptions o;
  o.collective = Collective::kAllReduce;
  o.algorithm = algorithm;
  o.ranks = static_cast<int>(state.range(0));
  o.iters = 3;
  o.warmup_iters = 1;
  o.check = false;
  double algbw = 0, busbw = 0;
  for (auto _ : state) {
    auto row = MeasureSize(o, kBytes);
    if (!row.ok()) {
      state.SkipWithError(std::string(row.status().message()).c_str());
      return;
    }
    state.SetIterationTime(row->out_of_place.time_us * 1e-6);
    algbw = row->out_of_place.algbw;
    busbw = row->out_of_place.busbw;
  }
  const double bound = AlgBwBound(Collective::kAllReduce, o.ranks, CopyBandwidthGbps());
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = busbw;
  state.counters["bound_GBps"] = bound;
  state.counters["frac_of_bound"] = algbw / bound;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}

BENCHMARK_CAPTURE(BM_AllReduce64MiB, builtin, Algorithm::kBuiltin)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AllReduce64MiB, ring, Algorithm::kRing)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

DISTLAB_BENCH_RATIO(BM_AllReduce64MiB, "frac_of_bound",
                    {"algbw / (B/n): the all-reduce's algorithm bandwidth over the shared-memory bound",
                     "B/n, B = memcpy bandwidth of all cores copying 64 MiB (notes/01 section 6)",
                     "bound_GBps"});

}  // namespace
}  // namespace distlab::collectives

BENCHMARK_MAIN();
