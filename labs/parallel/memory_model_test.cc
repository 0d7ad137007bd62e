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
