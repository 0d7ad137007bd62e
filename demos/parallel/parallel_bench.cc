// parallel_bench: step time of each strategy relative to single-process training, and GEMM throughput
// as a ratio to OpenBLAS's own peak on this machine. Ratios, side by side, in one run (absolute times on
// shared machines are noise).
//
//   bazel run --config=solution //demos/parallel:parallel_bench -- --benchmark_format=json
//
// BM_Step/<strategy>: counters step_ms (the strategy on 4 rank threads) and ratio_to_single (its step time
// over a single-process step of the same global batch, measured in the same benchmark).
// BM_Gemm/<size>: tensor::Gemm of two <size>^2 matrices (x W^T, one OpenBLAS thread, as a rank calls it).
// Counters: gflops (mean over the iterations), best_gflops (the fastest iteration), peak_gflops and
// ratio_to_peak = best_gflops / peak_gflops.
//
// The peak is OpenBLAS's own, on this machine, in this run, under the same conditions (one thread, the
// same transposes): before the first BM_Gemm, the best of many cblas_sgemm calls (about 5 GFLOP of work per
// size) at 256, 512 and 1024; afterwards it is raised whenever a measured call is faster, since
// tensor::Gemm *is* one cblas_sgemm call and its fastest iteration is one more sample of the same peak.
// Best against best at the same thread count: the ratio is <= 1 by construction (1 = this size set or
// reached the peak) and says how far below OpenBLAS's best rate a GEMM of that size runs. A mean (gflops)
// far below the best means other work shared the cores. Comparing a one-thread GEMM with an all-thread
// reference, or a mean with a best, gives ratios that mean nothing (> 1 on a busy machine).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "labs/parallel/data_parallel.h"
#include "labs/parallel/zero.h"
#include "reference/nn/model.h"
#include "reference/nn/optim.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tools/bench/ratio.h"

namespace distlab::parallel {
namespace {

constexpr int kRanks = 4;
constexpr int64_t kBatch = 64;
const nn::TinyLMConfig kCfg{/*vocab=*/64, /*hidden=*/64, /*inner=*/256, /*layers=*/4, false, 1};

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `steps` steps of strategy s (0 = DP bucketed, 1..3 = ZeRO-1..3) on kRanks threads.
void RunStrategy(int s, int steps) {
  auto st = comm::RunRanks(kRanks, [&](int rank, comm::Comm& c, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(kCfg);
    const int64_t per = kBatch / kRanks;
    if (s == 0) {
      auto ddp = BucketedDataParallel::Create(c, stream, model.Parameters(), 64 << 10);
      if (!ddp.ok()) return ddp.status();
      nn::AdamW opt(model.Parameters(), {});
      for (int i = 0; i < steps; ++i) {
        model.ZeroGrad();
        (*ddp)->BeginStep();
        model.Forward(nn::Slice(nn::SyntheticBatch(kCfg.vocab, 1, i, kBatch), rank * per, (rank + 1) * per));
        model.Backward();
        absl::Status f = (*ddp)->FinishGradientSync();
        if (!f.ok()) return f;
        opt.Step();
      }
      return absl::OkStatus();
    }
    auto trainer = ZeroTrainer::Create(c, stream, model, static_cast<ZeroStage>(s), {});
    if (!trainer.ok()) return trainer.status();
    for (int i = 0; i < steps; ++i) {
      auto l = (*trainer)->Step(
          nn::Slice(nn::SyntheticBatch(kCfg.vocab, 1, i, kBatch), rank * per, (rank + 1) * per));
      if (!l.ok()) return l.status();
    }
    return absl::OkStatus();
  });
  if (!comm::FirstError(st).ok()) std::abort();
}

void RunSingle(int steps) {
  nn::TinyLM model(kCfg);
  nn::AdamW opt(model.Parameters(), {});
  for (int i = 0; i < steps; ++i) {
    model.ZeroGrad();
    model.Forward(nn::SyntheticBatch(kCfg.vocab, 1, i, kBatch));
    model.Backward();
    opt.Step();
  }
}

void BM_Step(benchmark::State& state) {
  const int s = static_cast<int>(state.range(0));
  constexpr int kSteps = 10;
  double strategy = 0, single = 0;
  for (auto _ : state) {
    strategy += Seconds([&] { RunStrategy(s, kSteps); });
    single += Seconds([&] { RunSingle(kSteps); });
  }
  const double n = static_cast<double>(state.iterations()) * kSteps;
  state.counters["step_ms"] = 1e3 * strategy / n;
  state.counters["ratio_to_single"] = strategy / single;
  static const char* kNames[] = {"DP bucketed", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  state.SetLabel(kNames[s]);
}
BENCHMARK(BM_Step)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// GFLOP/s of one n x n by (n x n)^T product done in `seconds`.
double Gflops(int64_t n, double seconds) { return 2.0 * n * n * n / seconds / 1e9; }

// OpenBLAS's best single-threaded sgemm rate seen in this process (see the file comment).
double& PeakGflops() {
  static double peak = [] {
    tensor::SetBlasThreads(1);
    double best = 0;
    // About 5e9 flops per size: many samples, so that a busy machine still leaves some undisturbed.
    for (int n : {256, 512, 1024}) {
      std::vector<float> a(static_cast<size_t>(n) * n, 1.f), b(a), c(a.size());
      const int reps = 1 + static_cast<int>(5e9 / (2.0 * n * n * n));
      for (int r = 0; r <= reps; ++r) {  // call 0 warms caches and OpenBLAS's buffers
        const double t = Seconds([&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f,
                      c.data(), n);
        });
        if (r > 0) best = std::max(best, Gflops(n, t));
      }
    }
    return best;
  }();
  return peak;
}

void BM_Gemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  double& peak = PeakGflops();
  tensor::SetBlasThreads(1);
  tensor::Tensor a({n, n}), b({n, n}), c({n, n});
  tensor::FillNormal(a, 1, 1.f);
  tensor::FillNormal(b, 2, 1.f);
  tensor::Gemm(false, true, 1.f, a, b, 0.f, c);  // warm-up, not timed
  double seconds = 0, fastest = 1e30;
  for (auto _ : state) {
    const double t = Seconds([&] { tensor::Gemm(false, true, 1.f, a, b, 0.f, c); });
    seconds += t;
    fastest = std::min(fastest, t);
  }
  const double best = Gflops(n, fastest);
  peak = std::max(peak, best);
  state.counters["gflops"] = Gflops(n, seconds / static_cast<double>(state.iterations()));
  state.counters["best_gflops"] = best;
  state.counters["peak_gflops"] = peak;
  state.counters["ratio_to_peak"] = best / peak;
}
BENCHMARK(BM_Gemm)->Arg(64)->Arg(256)->Arg(1024)->MinTime(1.0)->UseRealTime();

}  // namespace
}  // namespace distlab::parallel

DISTLAB_BENCH_RATIO(
    BM_Step, "ratio_to_single",
    {"step time of the strategy on 4 rank threads over a single-process step of the same batch",
     "the single-process step", "", 0, false});
DISTLAB_BENCH_RATIO(BM_Gemm, "ratio_to_peak",
                    {"best GFLOP/s of tensor::Gemm over OpenBLAS's own best (one thread, same transposes)",
                     "OpenBLAS sgemm peak measured in the same run", "peak_gflops"});

BENCHMARK_MAIN();
