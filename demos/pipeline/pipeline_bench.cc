// Lab 5 benchmark: how fast the simulator is (goal: schedule + simulate p = 64, m = 512 in < 50 ms; for the
// interleaved schedules with v = 2 and 4 too, which place v times as many ops) and
// what the executor costs per op beyond the arithmetic (threads, mailboxes, Send/Recv).
//   bazel run --config=solution //demos/pipeline:pipeline_bench -- --benchmark_format=json
#include <benchmark/benchmark.h>

#include <chrono>

#include "labs/pipeline/executor.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "tools/bench/ratio.h"

namespace pl = distlab::pipeline;

namespace {

// Make the schedule and simulate it; items = ops placed.
template <absl::StatusOr<pl::Schedule> (*Make)(int, int)>
void BM_ScheduleAndSimulate(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  int64_t ops = 0, iters = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    ++iters;
    absl::StatusOr<pl::Schedule> sc = Make(p, m);
    absl::StatusOr<pl::SimResult> r = pl::Simulate(*sc, pl::Costs{1, 1, 1, 0.1});
    benchmark::DoNotOptimize(r->makespan);
    for (const auto& row : sc->stages) ops += static_cast<int64_t>(row.size());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  state.SetItemsProcessed(ops);
  state.counters["ms_per_run"] = ms / static_cast<double>(iters);
  state.counters["ratio_to_50ms_goal"] = ms / static_cast<double>(iters) / 50.0;
}
BENCHMARK_TEMPLATE(BM_ScheduleAndSimulate, pl::OneFOneB)->Args({64, 512})->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndSimulate, pl::ZeroBubbleH1)->Args({64, 512})->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndSimulate, pl::ZeroBubbleH2)->Args({64, 512})->Unit(benchmark::kMillisecond);
// Interleaved 1F1B places v times as many ops (each microbatch visits p*v chunks).
absl::StatusOr<pl::Schedule> InterleavedV2(int p, int m) { return pl::InterleavedOneFOneB(p, m, 2); }
absl::StatusOr<pl::Schedule> InterleavedV4(int p, int m) { return pl::InterleavedOneFOneB(p, m, 4); }
BENCHMARK_TEMPLATE(BM_ScheduleAndSimulate, InterleavedV2)->Args({64, 512})->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndSimulate, InterleavedV4)->Args({64, 512})->Unit(benchmark::kMillisecond);

// One step on the executor with no artificial cost and a tiny model: time per op is the overhead.
void BM_ExecutorOverheadPerOp(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  absl::StatusOr<pl::Schedule> sc = pl::ZeroBubbleH1(p, m);
  const pl::PipelineProblem problem = pl::MakeProblem(p, m, 8, 2, 1);
  int64_t ops = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    absl::StatusOr<pl::ExecResult> r = pl::RunPipeline(*sc, problem, pl::ExecutorOptions{});
    benchmark::DoNotOptimize(r->loss);
    ops += 3L * p * m;
  }
  state.SetItemsProcessed(ops);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  // Wall time per op of a whole step: the threads, mailboxes and Send/Recv rendezvous around tiny GEMMs.
  state.counters["us_per_op"] = us / static_cast<double>(ops);
}
BENCHMARK(BM_ExecutorOverheadPerOp)->Args({4, 16})->Unit(benchmark::kMillisecond)->UseRealTime();

DISTLAB_BENCH_RATIO(BM_ScheduleAndSimulate, "ratio_to_50ms_goal",
                    {"ms to make and simulate the schedule (p = 64, m = 512) over 50 ms", "the 50 ms goal",
                     "", 1.0, false});

}  // namespace

BENCHMARK_MAIN();
