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

// The f32 byte model (4 + 4 + 8 bytes per parameter) for Psi = 600 parameters over n = 3 ranks, in bytes
// per rank (notes/04-parallel.md section 4, the f32 column):
//
//   stage   params   grads   optimizer   total
//   0       2400     2400    4800        9600
//   1       2400     2400    1600        6400
//   2       2400      800    1600        4800
//   3        800      800    1600        3200
TEST(ZeroModelStates, FloatThirtyTwoEveryStage) {
  const double want[4][3] = {{2400, 2400, 4800}, {2400, 2400, 1600}, {2400, 800, 1600}, {800, 800, 1600}};
  for (int stage = 0; stage <= 3; ++stage) {
    const ModelStateBytes b = ZeroModelStates(600, 3, stage, /*mixed_precision=*/false);
    EXPECT_DOUBLE_EQ(b.params, want[stage][0]) << "stage " << stage;
    EXPECT_DOUBLE_EQ(b.grads, want[stage][1]) << "stage " << stage;
    EXPECT_DOUBLE_EQ(b.optimizer, want[stage][2]) << "stage " << stage;
  }
}

// Ring collectives over n = 3 ranks for Psi = 600 elements: a reduce-scatter or an all-gather makes each rank
// send (n - 1) / n Psi = 400 elements, an all-reduce (reduce-scatter + all-gather) 800. Per step:
//
//   stage   collectives                         elements sent per rank
//   0       AR                                  800
//   1, 2    RS + AG                             800
//   3       AG (forward) + AG (backward) + RS   1200
//   any, n = 1                                  0
TEST(CommElementsPerRank, RingVolumesOnThreeRanks) {
  EXPECT_DOUBLE_EQ(CommElementsPerRank(600, 3, 0), 800.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(600, 3, 1), 800.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(600, 3, 2), 800.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(600, 3, 3), 1200.0);
  EXPECT_DOUBLE_EQ(CommElementsPerRank(600, 1, 2), 0.0);
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
  // m = 2 examples g = (1, 0), (3, 0):
  //   mean G^ = (2, 0), |G^|^2 = 4;  deviations (-1, 0), (1, 0): T = (1 + 1) / (2 - 1) = 2;
  //   S = 3 (|G^|^2 less the part of it that is noise: notes/04-parallel.md section 6);  B_simple = 2 / 3.
  auto ns = GradientNoiseScale({{1.f, 0.f}, {3.f, 0.f}});
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_DOUBLE_EQ(ns->trace_sigma, 2.0);
  EXPECT_DOUBLE_EQ(ns->grad_norm_sq, 3.0);
  EXPECT_DOUBLE_EQ(ns->b_simple, 2.0 / 3.0);
}

}  // namespace
}  // namespace distlab::parallel
