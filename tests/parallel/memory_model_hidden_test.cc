// Hidden tests of Lab 4 stage D: the formulas, pinned on a Llama-3-8B-like configuration.
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/memory_model.h"

namespace distlab::parallel {
namespace {

constexpr double kPsi8B = 8030261248.0;

TEST(ParameterCountHidden, LlamaLikeShapes) {
  EXPECT_EQ(ParameterCount(TransformerShape{}), 8030261248);
  TransformerShape tied;
  tied.tied_embeddings = true;
  EXPECT_EQ(ParameterCount(tied), 8030261248 - 128256LL * 4096);
  // GPT-2 small-like: MHA (k = a), plain 2-matrix MLP, tied, 12 layers of 768, f = 3072, V = 50257.
  const TransformerShape gpt{12, 768, 12, 12, 3072, 50257, false, true};
  EXPECT_EQ(ParameterCount(gpt), 50257LL * 768 + 12 * (4LL * 768 * 768 + 2LL * 768 * 3072 + 2 * 768) + 768);
}

TEST(ActivationsHidden, PerLayerFormulaForEachRecomputation) {
  const TransformerShape s;  // h = 4096, a = 32
  // s = 4096, b = 1: s b h = 2^24; 34 + 5 a s / h = 34 + 160 = 194.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 4096, 1, Recompute::kNone, 1), 16777216.0 * 194);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 4096, 1, Recompute::kSelective, 1), 16777216.0 * 34);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 4096, 1, Recompute::kFull, 1), 16777216.0 * 2);
  // s = 256, b = 2: s b h = 2^21; 34 + 5*32*256/4096 = 44.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 256, 2, Recompute::kNone, 1), 2097152.0 * 44);
  // Tensor (+ sequence) parallelism divides every term by t.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 4096, 1, Recompute::kNone, 4), 16777216.0 * 194 / 4);
}

TEST(ZeroModelStatesHidden, EveryStageMixedAndF32) {
  const double psi = 1e9;
  const int n = 8;
  const double mixed[4] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n};
  const double f32[4] = {16 * psi, 8 * psi + 8 * psi / n, 4 * psi + 12 * psi / n, 16 * psi / n};
  for (int z = 0; z <= 3; ++z) {
    EXPECT_DOUBLE_EQ(ZeroModelStates(psi, n, z, true).total(), mixed[z]) << "stage " << z;
    EXPECT_DOUBLE_EQ(ZeroModelStates(psi, n, z, false).total(), f32[z]) << "stage " << z;
  }
  const ModelStateBytes z2 = ZeroModelStates(psi, n, 2, true);
  EXPECT_DOUBLE_EQ(z2.params, 2 * psi);
  EXPECT_DOUBLE_EQ(z2.grads, 2 * psi / n);
  EXPECT_DOUBLE_EQ(z2.optimizer, 12 * psi / n);
}

TEST(EstimateMemoryHidden, Llama3EightBOnTwoByEight) {
  Parallelism par;
  par.tp = 2;
  par.dp = 8;
  par.zero_stage = 1;
  const MemoryBreakdown m = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kSelective, par);
  const double psi = kPsi8B / 2;
  EXPECT_DOUBLE_EQ(m.states.total(), 4 * psi + 12 * psi / 8);
  EXPECT_DOUBLE_EQ(m.activations, 32 * 16777216.0 * 34 / 2);
  EXPECT_DOUBLE_EQ(m.total(), m.states.total() + m.activations);
  par.pp = 4;  // 1F1B: the first stage still holds L layers' worth of activations
  const MemoryBreakdown p = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kSelective, par);
  EXPECT_DOUBLE_EQ(p.states.total(), (4 * psi + 12 * psi / 8) / 4);
  EXPECT_DOUBLE_EQ(p.activations, m.activations);
}

// memcalc's defaults (notes/04-parallel.md): Llama-3-8B, s = 4096, b = 1, d = 8, selective recomputation,
// mixed precision: 136.7 GiB per rank without ZeRO, 31.96 GiB with ZeRO-3.
TEST(EstimateMemoryHidden, MemcalcDefaultsGive137And32GiB) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  Parallelism par;
  par.dp = 8;
  par.zero_stage = 0;
  const MemoryBreakdown z0 = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kSelective, par);
  EXPECT_DOUBLE_EQ(z0.total(), 16 * kPsi8B + 32 * 16777216.0 * 34);
  EXPECT_NEAR(z0.total() / kGiB, 136.66, 0.01);
  par.zero_stage = 3;
  const MemoryBreakdown z3 = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kSelective, par);
  EXPECT_DOUBLE_EQ(z3.total(), 16 * kPsi8B / 8 + 32 * 16777216.0 * 34);
  EXPECT_NEAR(z3.total() / kGiB, 31.96, 0.01);
}

// memory_model.h: real arithmetic everywhere, no integer division.
TEST(ActivationsHidden, RealArithmeticNotIntegerDivision) {
  const TransformerShape s;  // h = 4096, a = 32
  // 5 a s / h at s = 1000: 39.0625; at s = 100, b = 3: 3.90625.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 1000, 1, Recompute::kNone, 1), 1000.0 * 4096 * 73.0625);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(s, 100, 3, Recompute::kNone, 1), 300.0 * 4096 * 37.90625);
  // Psi / (t p) is not rounded to whole parameters: 8030261248 / 3 = 2676753749.33...
  Parallelism par;
  par.tp = 3;
  const MemoryBreakdown m = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kFull, par);
  EXPECT_DOUBLE_EQ(m.states.total(), 16 * (kPsi8B / 3));
  EXPECT_DOUBLE_EQ(m.activations, 32 * 16777216.0 * 2 / 3);
}

TEST(CommVolumeHidden, DdpZeroOneTwoAndThree) {
  EXPECT_DOUBLE_EQ(CommElementsPerRank(1000, 4, 0), 1500.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(1000, 4, 2), 1500.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(1000, 4, 3), 2250.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(1000, 1, 3), 0.0);
}

// B_simple = tr(Sigma) / |G|^2 from per-example gradients, unbiased estimators (memory_model.h).
// g = (1,0), (3,0), (2,2), (2,-2): mean (2, 0), |G^|^2 = 4; deviations (-1,0), (1,0), (0,2), (0,-2) sum to 10
// squared, T = 10 / 3; S = 4 - T / 4 = 19 / 6; B_simple = (10/3) / (19/6) = 20 / 19. The two cases below
// check T, then S and B given T, so that each names the estimator that is off.
const std::vector<std::vector<float>> kHandWorked = {{1.f, 0.f}, {3.f, 0.f}, {2.f, 2.f}, {2.f, -2.f}};

TEST(NoiseScaleHidden, TraceSigmaDividesByMMinusOne) {
  auto ns = GradientNoiseScale(kHandWorked);
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_NEAR(ns->trace_sigma, 10.0 / 3, 1e-12)
      << "T = sum_i |g_i - G^|^2 / (m - 1) = 10 / 3 (10 / 4 = 2.5 is the biased, divide-by-m variance)";
}

TEST(NoiseScaleHidden, GradNormSubtractsTheVarianceOfTheMean) {
  auto ns = GradientNoiseScale(kHandWorked);
  ASSERT_TRUE(ns.ok()) << ns.status();
  // Given the returned T (checked by the case above): S = |G^|^2 - T / m, B_simple = T / S.
  EXPECT_NEAR(ns->grad_norm_sq, 4.0 - ns->trace_sigma / 4, 1e-12)
      << "S = |G^|^2 - T / m with |G^|^2 = 4, m = 4, T = " << ns->trace_sigma
      << " (|G^|^2 alone overestimates |G|^2 by the variance of the mean)";
  EXPECT_NEAR(ns->b_simple, ns->trace_sigma / ns->grad_norm_sq, 1e-12) << "B_simple = T / S";
}

// Scaling every gradient by c scales T and S by c^2 and leaves B_simple; identical examples have no noise.
TEST(NoiseScaleHidden, ScaleInvariantAndZeroWithoutNoise) {
  auto a = GradientNoiseScale({{1.f, 0.f}, {3.f, 0.f}, {2.f, 2.f}, {2.f, -2.f}});
  auto b = GradientNoiseScale({{3.f, 0.f}, {9.f, 0.f}, {6.f, 6.f}, {6.f, -6.f}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->trace_sigma, 9 * a->trace_sigma, 1e-9);
  EXPECT_NEAR(b->b_simple, a->b_simple, 1e-12);
  auto same = GradientNoiseScale({{0.5f, -1.f, 2.f}, {0.5f, -1.f, 2.f}, {0.5f, -1.f, 2.f}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->trace_sigma, 0.0);
  EXPECT_NEAR(same->grad_norm_sq, 5.25, 1e-12);
  EXPECT_EQ(same->b_simple, 0.0);
}

TEST(NoiseScaleHidden, BadInputIsAnError) {
  EXPECT_EQ(GradientNoiseScale({{1.f, 2.f}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientNoiseScale({{1.f, 2.f}, {1.f}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientNoiseScale({{}, {}}).status().code(), absl::StatusCode::kInvalidArgument);
  // (1) and (-1): mean 0, T = 2, S = 0 - 1 < 0: the noise swamps the gradient.
  EXPECT_EQ(GradientNoiseScale({{1.f}, {-1.f}}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace distlab::parallel
