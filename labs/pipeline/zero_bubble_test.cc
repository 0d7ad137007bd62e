// Public tests of Lab 5 stage B: zero-bubble schedules against the Zero Bubble paper's Table 2.
#include "labs/pipeline/zero_bubble.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/simulator.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

// T_F = T_B = T_W = 1, p = 4, m = 8. 1F1B's bubble is 9; ZB-H1 moves W into the cool-down and lets B run
// ahead, leaving 3, a third:
//   stage 0: F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 ... B7 W3 W4 W5 W6 W7   (waits 3 slots for B0)
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

// ZB-H2 with p = 4 holds 7 microbatches on stage 0 and has no bubble at all when T_F = T_B = T_W.
TEST(ZeroBubbleH2, ParallelogramHasNoBubble) {
  ASSERT_OK_AND_ASSIGN(Schedule h2, ZeroBubbleH2(4, 8));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(h2, Costs{1, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(r.bubble, 0);
  EXPECT_EQ(r.peak_activations[0], 7);
  EXPECT_EQ(ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, 4, Costs{1, 1, 1, 0}).peak_activations, 7);
}

// A worked example of ZB-H2: p = 3, m = 5, T_F = T_B = T_W = 1, comm = 0, one op per time unit:
//   t          0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16
//   stage 0:   F0 F1 F2 F3 F4 B0 W0 B1 W1 B2 W2 B3 W3 B4 W4
//   stage 1:   .  F0 F1 F2 B0 F3 B1 F4 B2 W0 B3 W1 B4 W2 W3 W4
//   stage 2:   .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 W0 W1 W2 W3 W4
// B0 reaches stage 0 at t = 5, and stage 0 has filled the wait with forwards: no stage waits for its first
// B. Stage s is busy without a gap from s to s + 15 (a parallelogram): bubble 0. Peak activations 5, 3, 1.
TEST(ZeroBubbleH2, ThreeStagesByHand) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(3, 5));
  EXPECT_EQ(sc.name, "ZB-H2");
  ASSERT_EQ(sc.stages.size(), 3u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 F3 F4 B0 W0 B1 W1 B2 W2 B3 W3 B4 W4");
  EXPECT_EQ(Row(sc, 1), "F0 F1 F2 B0 F3 B1 F4 B2 W0 B3 W1 B4 W2 W3 W4");
  EXPECT_EQ(Row(sc, 2), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 W0 W1 W2 W3 W4");
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(r.bubble, 0);
  EXPECT_DOUBLE_EQ(r.makespan, 17);
  EXPECT_EQ(r.peak_activations, (std::vector<int>{5, 3, 1}));
}

// A worked example of Table 2: p = 3, T_F = 2, T_B = 2, T_W = 1, comm = 0. ZB-H1 (m = 6), stage 0:
//   F0 [0,2] F1 [2,4] F2 [4,6]  idle [6,10]  B0 [10,12] F3 ... B3 [22,24] W0 [24,25]  idle [25,26]
//   B4 [26,28] W1 [28,29]  idle [29,30]  B5 [30,32] W2 W3 W4 W5 [32,36]
// It waits 4 for B0 and then 1 twice in the drain, where a W is shorter than the gap before the next B:
// bubble 6. The same costs give 1F1B a bubble of 10 and ZB-H2 one of 4; stage 0 holds 3, 3 and 5
// microbatches. With a heavier W (T_F = 1, T_B = 2, T_W = 3) the paper's closed forms give 0 for ZB-H1 and
// -6 for ZB-H2, while the simulator gives 4 and 2: Table 2 returns the closed forms unclamped.
TEST(ZeroBubbleTable2, ByHand) {
  const Costs c{2, 2, 1, 0};
  ASSERT_OK_AND_ASSIGN(Schedule h1, ZeroBubbleH1(3, 6));
  ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(h1, c));
  EXPECT_DOUBLE_EQ(r1.timeline[0][3].start, 10);  // B0
  EXPECT_DOUBLE_EQ(r1.bubble, 6);
  const Table2Row a = ZeroBubbleTable2(Table2Schedule::kOneFOneB, 3, c);
  const Table2Row b = ZeroBubbleTable2(Table2Schedule::kZeroBubbleH1, 3, c);
  const Table2Row d = ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, 3, c);
  EXPECT_DOUBLE_EQ(a.bubble, 10);
  EXPECT_DOUBLE_EQ(b.bubble, 6);
  EXPECT_DOUBLE_EQ(d.bubble, 4);
  EXPECT_EQ(a.peak_activations, 3);
  EXPECT_EQ(b.peak_activations, 3);
  EXPECT_EQ(d.peak_activations, 5);
  const Costs heavy_w{1, 2, 3, 0};
  ASSERT_OK_AND_ASSIGN(SimResult heavy1, Simulate(h1, heavy_w));
  EXPECT_DOUBLE_EQ(heavy1.bubble, 4);
  EXPECT_DOUBLE_EQ(ZeroBubbleTable2(Table2Schedule::kZeroBubbleH1, 3, heavy_w).bubble, 0);
  EXPECT_DOUBLE_EQ(ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, 3, heavy_w).bubble, -6);
}

// Stretch: ZeroBubbleGreedy is the greedy schedule with the real costs and one limit for every stage.
TEST(ZeroBubbleGreedy, OneLimitForEveryStage) {
  const Costs c{1, 1, 0.5, 0.5};
  ASSERT_OK_AND_ASSIGN(Schedule g, ZeroBubbleGreedy(3, 4, c, 3));
  ASSERT_OK_AND_ASSIGN(Schedule same, GreedySplitSchedule(3, 4, c, {3, 3, 3}));
  EXPECT_EQ(g.name, "ZB-greedy(3)");
  ASSERT_EQ(g.stages.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(Row(g, s), Row(same, s)) << "stage " << s;
}

// Stretch, a worked example of interleaved 1F1B: p = 2, m = 2, v = 2 (virtual stages: 0 = rank 0 chunk 0,
// 1 = rank 1 chunk 0, 2 = rank 0 chunk 1, 3 = rank 1 chunk 1), one group of N = p = 2 microbatches.
// Rank 0 warms up with 4 forwards, rank 1 with 2:
//   rank 0: F0 F1 F0.1 F1.1 BW0.1 BW1.1 BW0 BW1
//   rank 1: F0 F1 F0.1 BW0.1 F1.1 BW1.1 BW0 BW1
// With chunk ops at half a stage's cost (T = 0.5 each, a BW 1), comm = 0:
//   rank 0: F0 F1 F0.1 F1.1 [0,2]  idle [2,3]  BW0.1 [3,4]  idle [4,4.5]  BW1.1 [4.5,5.5]  BW0 [5.5,6.5]
//           BW1 [6.5,7.5]
//   rank 1: idle [0,0.5]  F0 F1 F0.1 [0.5,2]  BW0.1 [2,3]  F1.1 [3,3.5]  BW1.1 [3.5,4.5]  BW0 [4.5,5.5]
//           BW1 [5.5,6.5]  idle [6.5,7.5]
// Each rank works 6 (the ideal step m (F+B+W)); rank 0 idles 1.5 inside its span: bubble 1.5, a quarter of
// the ideal step (plain 1F1B at full cost: 3, a half).
TEST(InterleavedOneFOneB, TwoChunksOnTwoRanksByHand) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(2, 2, 2));
  EXPECT_EQ(sc.name, "interleaved 1F1B (v=2)");
  EXPECT_EQ(sc.v, 2);
  ASSERT_EQ(sc.stages.size(), 2u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F0.1 F1.1 BW0.1 BW1.1 BW0 BW1");
  EXPECT_EQ(Row(sc, 1), "F0 F1 F0.1 BW0.1 F1.1 BW1.1 BW0 BW1");
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{0.5, 0.5, 0.5, 0}));
  EXPECT_DOUBLE_EQ(r.makespan, 7.5);
  EXPECT_DOUBLE_EQ(r.bubble, 1.5);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(2, 2, 2), 0.25);
}

// Stretch: interleaved 1F1B with v = 2 chunks per rank, each chunk op costing half a stage's op, p = 4,
// m = 8: bubble 4.5, half of 1F1B's 9 (the bubble over the ideal step 24 is 3/16).
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
// still 4.5 at half-cost chunk ops.
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
