// Public tests of Lab 5 stage B: zero-bubble schedules against the Zero Bubble paper's Table 2.
#include "labs/pipeline/zero_bubble.h"

#include "gtest/gtest.h"
#include "labs/pipeline/simulator.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

// T_F = T_B = T_W = 1, p = 4, m = 8. 1F1B's bubble is (p-1)(F+B+W) = 9; ZB-H1 moves W into the cool-down
// and lets B run ahead, leaving (p-1)(F+B-W) = 3, a third:
//   stage 0: F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 ... B7 W3 W4 W5 W6 W7   (waits (p-1) T_B for B0)
TEST(ZeroBubbleH1, BubbleIsAThirdOfOneFOneB) {
  const Costs unit{1, 1, 1, 0};
  ASSERT_OK_AND_ASSIGN(Schedule h1, ZeroBubbleH1(4, 8));
  ASSERT_OK_AND_ASSIGN(Schedule base, OneFOneB(4, 8));
  ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(h1, unit));
  ASSERT_OK_AND_ASSIGN(SimResult r0, Simulate(base, unit));
  EXPECT_DOUBLE_EQ(r0.bubble, 9);
  EXPECT_DOUBLE_EQ(r1.bubble, 3);
  EXPECT_EQ(r1.peak_activations[0], 4);  // the same p M_B as 1F1B
}

// ZB-H2 holds 2p-1 microbatches on stage 0 and has no bubble at all when T_F = T_B = T_W.
TEST(ZeroBubbleH2, ParallelogramHasNoBubble) {
  ASSERT_OK_AND_ASSIGN(Schedule h2, ZeroBubbleH2(4, 8));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(h2, Costs{1, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(r.bubble, 0);
  EXPECT_EQ(r.peak_activations[0], 7);
  EXPECT_EQ(ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, 4, Costs{1, 1, 1, 0}).peak_activations, 7);
}

// Stretch: interleaved 1F1B with v = 2 chunks per rank, each chunk op costing half a stage's op. The fill
// and the drain are still p-1 op slots, but each slot is half as long: bubble (p-1)(F+B+W)/v = 4.5, half of
// 1F1B's 9.
//   rank 0: F0 F1 F2 F3 F0.1 F1.1 F2.1 F3.1 ... (groups of p microbatches per chunk)
TEST(InterleavedOneFOneB, TwoChunksHalveTheBubble) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(4, 8, 2));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{0.5, 0.5, 0.5, 0}));
  EXPECT_DOUBLE_EQ(r.bubble, 4.5);
  EXPECT_DOUBLE_EQ(r.makespan, 24 + 4.5);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(4, 8, 2), 3.0 / 16);
  // m must be a multiple of p.
  EXPECT_EQ(InterleavedOneFOneB(4, 6, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::pipeline
