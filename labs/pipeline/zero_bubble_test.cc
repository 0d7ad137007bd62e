// Public tests of Lab 5 stage B: zero-bubble schedules against the Zero Bubble paper's Table 2.
#include "labs/pipeline/zero_bubble.h"

#include <string>

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

std::string Row(const Schedule& sc, int s) {
  std::string out;
  for (const Op& op : sc.stages[s]) out += (out.empty() ? "" : " ") + ToString(op);
  return out;
}

// ZB-H1, p = 3, m = 4, T_F = T_B = T_W = 1, one op per time unit:
//   t          0  1  2  3  4  5  6  7  8  9  10 11 12 13
//   stage 0:   F0 F1 F2 .  .  B0 F3 B1 W0 B2 W1 B3 W2 W3
//   stage 1:   .  F0 F1 .  B0 F2 B1 F3 B2 W0 B3 W1 W2 W3
//   stage 2:   .  .  F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3
// At t = 6 stage 1 is free with W0 to do, and B1's gradient arrives from stage 2 at exactly 6: an input that
// arrives the moment the stage becomes free has arrived, so B1 runs before W0 (zero_bubble.h, tie-breaks).
TEST(GreedySplitSchedule, ZeroBubbleH1ByHand) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(3, 4));
  ASSERT_EQ(sc.stages.size(), 3u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 B0 F3 B1 W0 B2 W1 B3 W2 W3");
  EXPECT_EQ(Row(sc, 1), "F0 F1 B0 F2 B1 F3 B2 W0 B3 W1 W2 W3");
  EXPECT_EQ(Row(sc, 2), "F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3");
}

// With comm = 0.5, T_F = T_B = 1, T_W = 0.5 and 3 microbatches allowed per stage, stage 1 finishes W1 at
// t = 9 with no W left; B2's gradient (stage 2's B2 ends at 9) and F3's activation (stage 0's F3 ends at 9)
// both arrive at 9.5. The stage waits, and on the tie B goes first:
//   stage 1: F0 F1 F2 B0 W0 B1 W1 [wait] B2 F3 W2 B3 W3
TEST(GreedySplitSchedule, BackwardBeforeForwardWhenBothArriveTogether) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GreedySplitSchedule(3, 4, Costs{1, 1, 0.5, 0.5}, {3, 3, 3}));
  ASSERT_EQ(sc.stages.size(), 3u);
  EXPECT_EQ(Row(sc, 1), "F0 F1 F2 B0 W0 B1 W1 B2 F3 W2 B3 W3");
  EXPECT_OK(ValidateSchedule(sc));
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
}

// v = 1 is plain 1F1B, for any m. With v > 1 the microbatches go through the chunks in groups of N (default
// p): m = 6 on p = 4 leaves a last group of 2 < p, an error; N = 6 makes one group of 6, and the bubble is
// still (p-1)(F+B+W)/v = 4.5 at half-cost chunk ops.
TEST(InterleavedOneFOneB, OneChunkIsOneFOneBAndGroupsRelaxM) {
  ASSERT_OK_AND_ASSIGN(Schedule one, InterleavedOneFOneB(3, 7, 1));
  ASSERT_OK_AND_ASSIGN(Schedule plain, OneFOneB(3, 7));
  for (int s = 0; s < 3; ++s) EXPECT_EQ(Row(one, s), Row(plain, s)) << "stage " << s;
  const absl::Status short_group = InterleavedOneFOneB(4, 6, 2).status();
  EXPECT_EQ(short_group.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(short_group.message()).find("multiple"), std::string::npos) << short_group;
  ASSERT_OK_AND_ASSIGN(Schedule six, InterleavedOneFOneB(4, 6, 2, 6));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(six, Costs{0.5, 0.5, 0.5, 0}));
  EXPECT_DOUBLE_EQ(r.bubble, 4.5);
}

}  // namespace
}  // namespace distlab::pipeline
