// What recording costs (trace.h): an instrumented call with tracing off and on, against the same loop with
// no instrumentation, in one run.
//
//   bazel run --config=solution //reference/trace:trace_bench      (or ./labctl bench)
//
// BM_Baseline: a loop doing a little work (a few dozen ns, about what an argument check costs) per item.
// BM_SpanOff:  the same with a Span around each item while recording is off: one relaxed load and a branch.
// BM_SpanOn:   the same while recording, with three arguments per event, as the runtime records a call.
// Counters: ns_per_item (CPU time of the benchmark's thread per item, so other load on the machine does not
// count), off_over_baseline_ratio in BM_SpanOff and on_minus_baseline_ns (what one event costs) in BM_SpanOn.
#include <time.h>

#include <cstdint>

#include "benchmark/benchmark.h"
#include "reference/trace/trace.h"
#include "tools/bench/ratio.h"

namespace {

namespace tr = distlab::trace;

uint64_t Work(uint64_t x) {
  for (int i = 0; i < 16; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

double g_baseline_ns = 0;

// CPU time of this thread: what an event costs the thread that records it, whatever else the machine runs.
int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

template <int kMode>  // 0: no instrumentation, 1: Span with recording off, 2: on
void BM_Span(benchmark::State& state) {
  if (kMode == 2) {
    tr::Start();
  } else {
    (void)tr::Stop();
  }
  uint64_t x = 1;
  const int64_t t0 = ThreadCpuNs();
  int64_t n = 0;
  for (auto _ : state) {
    if (kMode == 0) {
      x = Work(x);
    } else {
      tr::Span s("AllReduce", "comm", 0);
      if (s.active()) s.args().Add("count", static_cast<int64_t>(n)).Add("dtype", "f32").Add("seq", n);
      x = Work(x);
    }
    ++n;
    if (kMode == 2 && (n & 0xffff) == 0) {
      state.PauseTiming();
      tr::Clear();  // keep memory bounded; clearing is not part of an event's cost
      state.ResumeTiming();
    }
  }
  benchmark::DoNotOptimize(x);
  const double ns = static_cast<double>(ThreadCpuNs() - t0) / static_cast<double>(state.iterations());
  state.counters["ns_per_item"] = ns;
  if (kMode == 0) g_baseline_ns = ns;
  if (kMode == 1 && g_baseline_ns > 0) state.counters["off_over_baseline_ratio"] = ns / g_baseline_ns;
  if (kMode == 2 && g_baseline_ns > 0) state.counters["on_minus_baseline_ns"] = ns - g_baseline_ns;
  (void)tr::Stop();
  tr::Clear();
}

void BM_Baseline(benchmark::State& state) { BM_Span<0>(state); }
void BM_SpanOff(benchmark::State& state) { BM_Span<1>(state); }
void BM_SpanOn(benchmark::State& state) { BM_Span<2>(state); }
BENCHMARK(BM_Baseline)->MinTime(0.5);
BENCHMARK(BM_SpanOff)->MinTime(0.5);
BENCHMARK(BM_SpanOn)->MinTime(0.5);

DISTLAB_BENCH_RATIO(
    BM_SpanOff, "off_over_baseline_ratio",
    {"ns per item with a Span while recording is off over ns per item without instrumentation",
     "the uninstrumented loop (BM_Baseline, same run)", "", 1.05, false});

}  // namespace

BENCHMARK_MAIN();
