// Public tests of Lab 4 stage D (memory and communication formulas).
#include "labs/parallel/memory_model.h"

#include "gtest/gtest.h"

namespace distlab::parallel {
namespace {

TEST(ParameterCount, Llama3EightB) {
  // The defaults are Llama-3-8B: 8.03 B parameters.
  EXPECT_EQ(ParameterCount(TransformerShape{}), 8030261248);
}

TEST(ZeroModelStates, MixedPrecisionStageTwo) {
  // Z2: 2 Psi + 14 Psi / n bytes; Psi = 1000, n = 4 -> 2000 + 3500.
  const ModelStateBytes b = ZeroModelStates(1000, 4, 2, true);
  EXPECT_DOUBLE_EQ(b.total(), 5500.0);
}

// Real arithmetic, never integer division: at s = 1000 the scores term 5 a s / h = 5 * 32 * 1000 / 4096 is
// 39.0625 (integer division would give 39), so a layer holds s b h (34 + 39.0625) bytes.
TEST(ActivationBytesPerLayer, RealDivisionInTheScoresTerm) {
  const TransformerShape shape;  // h = 4096, a = 32
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(shape, 1000, 1, Recompute::kNone, 1), 1000.0 * 4096 * 73.0625);
  // t = 3 does not divide s b h 34: the result is a real number of bytes too.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(shape, 1000, 1, Recompute::kSelective, 3), 1000.0 * 4096 * 34 / 3);
  // Nor is Psi / (t p) rounded to whole parameters: 8030261248 / 3 = 2676753749.33...
  Parallelism par;
  par.tp = 3;
  EXPECT_DOUBLE_EQ(EstimateMemory(shape, 4096, 1, Recompute::kFull, par).states.total(),
                   16 * (8030261248.0 / 3));
}

TEST(GradientNoiseScale, TwoExamples) {
  // g = (1, 0), (3, 0): mean (2, 0); T = (1 + 1) / (2 - 1) = 2; S = |mean|^2 - T / m = 4 - 1 = 3.
  auto ns = GradientNoiseScale({{1.f, 0.f}, {3.f, 0.f}});
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_DOUBLE_EQ(ns->trace_sigma, 2.0);
  EXPECT_DOUBLE_EQ(ns->grad_norm_sq, 3.0);
  EXPECT_DOUBLE_EQ(ns->b_simple, 2.0 / 3.0);
}

}  // namespace
}  // namespace distlab::parallel
