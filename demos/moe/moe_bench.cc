// moe_bench: what routing and dispatch cost. The MoE layer (router, softmax, top-k, gather, k expert MLPs,
// scatter-combine) against the dense MLP of the same active FLOPs: one MLP of inner size k f, which does the
// same GEMM work per token as k experts of inner size f. Counters: tokens/s of each and their ratio
// (moe_over_dense < 1 is the price of routing and dispatch on this machine). Ratios, not times, are the
// result.
#include <chrono>
#include <memory>

#include "benchmark/benchmark.h"
#include "labs/moe/moe_layer.h"
#include "reference/nn/layers.h"
#include "reference/tensor/random.h"
#include "tools/bench/ratio.h"

namespace {

using distlab::moe::MoeConfig;
using distlab::moe::MoeLayer;
using distlab::tensor::Tensor;

// args: T tokens, h hidden, f expert inner size, E experts, k top-k
void BM_MoeVsDense(benchmark::State& state) {
  const int64_t T = state.range(0), h = state.range(1), f = state.range(2);
  const int E = static_cast<int>(state.range(3)), k = static_cast<int>(state.range(4));
  MoeConfig c;
  c.hidden = h, c.inner = f, c.experts = E, c.top_k = k, c.seed = 1;
  auto layer = MoeLayer::Create(c);
  if (!layer.ok()) {
    state.SkipWithError(layer.status().ToString().c_str());
    return;
  }
  // A router with some spread, so tokens reach every expert as in training.
  distlab::tensor::FillNormal((*layer)->router().weight().value, 2, 1.f);
  distlab::nn::Mlp dense("dense", h, k * f, 1);
  Tensor x({T, h});
  distlab::tensor::FillNormal(x, 3, 1.f);

  // The dense reference, timed side by side in the same process.
  using Clock = std::chrono::steady_clock;
  const int reps = 20;
  dense.Forward(x);
  auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) benchmark::DoNotOptimize(dense.Forward(x));
  const double dense_s = std::chrono::duration<double>(Clock::now() - t0).count() / reps;

  auto t1 = Clock::now();
  for (auto _ : state) {
    auto y = (*layer)->Forward(x);
    if (!y.ok()) {
      state.SkipWithError(y.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(y->f32());
  }
  const double moe_s = std::chrono::duration<double>(Clock::now() - t1).count() / state.iterations();
  state.SetItemsProcessed(state.iterations() * T);
  state.counters["moe_tok_per_s"] = T / moe_s;
  state.counters["dense_tok_per_s"] = T / dense_s;
  state.counters["moe_over_dense"] = dense_s / moe_s;  // throughput ratio, same active FLOPs
}

BENCHMARK(BM_MoeVsDense)
    ->ArgNames({"T", "h", "f", "E", "k"})
    ->Args({1024, 128, 256, 8, 1})
    ->Args({1024, 128, 256, 8, 2})
    ->Args({1024, 256, 512, 8, 2})
    ->Args({4096, 128, 256, 16, 2})
    ->Unit(benchmark::kMillisecond);

}  // namespace

DISTLAB_BENCH_RATIO(BM_MoeVsDense, "moe_over_dense",
                    {"tokens/s of the MoE layer over tokens/s of a dense MLP of the same active FLOPs",
                     "the dense MLP (inner size k f)", "dense_tok_per_s"});

BENCHMARK_MAIN();
