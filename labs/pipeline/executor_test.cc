// Public tests of Lab 5 stage C: the executor runs 1F1B on 2 ranks and gets the unpipelined gradients; the
// message order of two small schedules.
#include "labs/pipeline/executor.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

// The problem of a case: hidden size h, rows per microbatch and the values' seed drawn from the grading seed
// (`bazel test ... --test_env=DISTLAB_GRADING_SEED=S` draws the problem of seed S), on p = 2 ranks.
struct DrawnProblem {
  int hidden, rows;
  uint64_t seed;
  std::string text() const {
    return "MakeProblem(2, 2, " + std::to_string(hidden) + ", " + std::to_string(rows) + ", " +
           std::to_string(seed) + "); " + distlab::testing::SeedNote();
  }
};
DrawnProblem DrawTwoRankProblem() {
  distlab::testing::CaseRandom rnd;
  DrawnProblem d;
  d.hidden = rnd.Int(2, 6);
  d.rows = rnd.Int(1, 4);
  d.seed = rnd.Int(1, 1 << 30);
  return d;
}

// The same problem through the executor twice: GPipe and 1F1B must agree on every gradient (they compute
// the same sums in the same order), and the timeline must follow the schedule.
//   rank 0: F0 F1 BW0 BW1        rank 1: F0 BW0 F1 BW1
TEST(RunPipeline, OneFOneBMatchesGPipeOnTwoRanks) {
  const DrawnProblem d = DrawTwoRankProblem();
  SCOPED_TRACE(d.text());
  const PipelineProblem pr = MakeProblem(2, 2, d.hidden, d.rows, d.seed);
  const size_t hh = static_cast<size_t>(d.hidden) * d.hidden;
  ASSERT_OK_AND_ASSIGN(Schedule gpipe, GPipe(2, 2));
  ASSERT_OK_AND_ASSIGN(Schedule onefoneb, OneFOneB(2, 2));
  ASSERT_OK_AND_ASSIGN(ExecResult a, RunPipeline(gpipe, pr, ExecutorOptions{}));
  ASSERT_OK_AND_ASSIGN(ExecResult b, RunPipeline(onefoneb, pr, ExecutorOptions{}));
  ASSERT_EQ(a.weight_grad.size(), 2u);
  ASSERT_EQ(b.weight_grad.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(a.weight_grad[s].size(), hh);
    ASSERT_EQ(b.weight_grad[s].size(), hh);
    for (size_t k = 0; k < hh; ++k) EXPECT_NEAR(a.weight_grad[s][k], b.weight_grad[s][k], 1e-6);
    ASSERT_EQ(b.timeline[s].size(), onefoneb.stages[s].size());
    for (size_t k = 0; k < b.timeline[s].size(); ++k) EXPECT_EQ(b.timeline[s][k].op, onefoneb.stages[s][k]);
  }
  EXPECT_NEAR(a.loss, b.loss, 1e-6);
  EXPECT_GT(a.loss, 0);
}

// The step's loss is the mean over its m microbatches, L = (L_0 + L_1) / 2 for m = 2, where L_i is the loss
// of a step that holds microbatch i alone (m = 1). So every block's gradient of the two-microbatch step is
// the mean of the two one-microbatch steps' gradients, and so is the loss:
//   dL/dW_k = (dL_0/dW_k + dL_1/dW_k) / 2        (1F1B, p = 2: rank 0 F0 F1 BW0 BW1, rank 1 F0 BW0 F1 BW1)
TEST(RunPipeline, StepGradientIsTheMeanOverMicrobatches) {
  const DrawnProblem d = DrawTwoRankProblem();
  SCOPED_TRACE(d.text());
  const PipelineProblem pr = MakeProblem(2, 2, d.hidden, d.rows, d.seed);
  const int hh = d.hidden * d.hidden;
  ASSERT_OK_AND_ASSIGN(Schedule two, OneFOneB(2, 2));
  ASSERT_OK_AND_ASSIGN(Schedule one, OneFOneB(2, 1));
  ASSERT_OK_AND_ASSIGN(ExecResult both, RunPipeline(two, pr, ExecutorOptions{}));
  std::vector<ExecResult> alone;
  for (int i = 0; i < 2; ++i) {
    PipelineProblem single = pr;
    single.m = 1;
    single.input = {pr.input[i]};
    single.target = {pr.target[i]};
    ASSERT_OK_AND_ASSIGN(ExecResult r, RunPipeline(one, single, ExecutorOptions{}));
    alone.push_back(r);
  }
  EXPECT_NEAR(both.loss, (alone[0].loss + alone[1].loss) / 2, 1e-6);
  ASSERT_EQ(both.weight_grad.size(), 2u);
  ASSERT_EQ(both.bias_grad.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(static_cast<int>(both.weight_grad[k].size()), hh);
    for (int e = 0; e < hh; ++e) {
      const float want = (alone[0].weight_grad[k][e] + alone[1].weight_grad[k][e]) / 2;
      EXPECT_NEAR(both.weight_grad[k][e], want, 1e-6 + 1e-4 * std::abs(want))
          << "block " << k << " dW[" << e << "]";
    }
    ASSERT_EQ(static_cast<int>(both.bias_grad[k].size()), d.hidden);
    for (int e = 0; e < d.hidden; ++e) {
      const float want = (alone[0].bias_grad[k][e] + alone[1].bias_grad[k][e]) / 2;
      EXPECT_NEAR(both.bias_grad[k][e], want, 1e-6 + 1e-4 * std::abs(want))
          << "block " << k << " db[" << e << "]";
    }
  }
}

// A worked example of the message order: GPipe, p = 3, m = 2, unit costs (a BW costs 2), comm = 0:
//   stage 0: F0 [0,1]  F1 [1,2]  BW0 [8,10]  BW1 [10,12]
//   stage 1: F0 [1,2]  F1 [2,3]  BW0 [6,8]   BW1 [8,10]
//   stage 2: F0 [2,3]  F1 [3,4]  BW0 [4,6]   BW1 [6,8]
// Each message leaves when its op ends; ties by sender, then receiver:
//   t = 1  0->1 act 0      t = 2  0->1 act 1, 1->2 act 0      t = 3  1->2 act 1
//   t = 6  2->1 grad 0     t = 8  1->0 grad 0, 2->1 grad 1    t = 10 1->0 grad 1
// (stage 0's backwards and stage 2's forward outputs have nowhere to go).
TEST(MessageOrder, ThreeStagesByHand) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(3, 2));
  ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, Costs{1, 1, 1, 0}));
  const std::vector<Message> want = {{0, 1, true, 0},  {0, 1, true, 1},  {1, 2, true, 0},  {1, 2, true, 1},
                                     {2, 1, false, 0}, {1, 0, false, 0}, {2, 1, false, 1}, {1, 0, false, 1}};
  EXPECT_EQ(order, want);
}

// Interleaved, p = 2, m = 2, v = 2 (the rows of InterleavedOneFOneB(2, 2, 2)), unit costs (a BW costs 2):
//   rank 0: F0 [0,1]  F1 [1,2]  F0.1 [2,3]  F1.1 [3,4]  BW0.1 [6,8]  BW1.1 [9,11]  BW0 [11,13]  BW1 [13,15]
//   rank 1: F0 [1,2]  F1 [2,3]  F0.1 [3,4]  BW0.1 [4,6]  F1.1 [6,7]  BW1.1 [7,9]  BW0 [9,11]  BW1 [11,13]
// Virtual stages 0, 1, 2, 3 live on ranks 0, 1, 0, 1. A message carries the sender's chunk (in brackets):
//   t = 1   0->1 act 0 [0]
//   t = 2   0->1 act 1 [0], 1->0 act 0 [0]       t = 3   0->1 act 0 [1], 1->0 act 1 [0]
//   t = 4   0->1 act 1 [1]                       t = 6   1->0 grad 0 [1]
//   t = 8   0->1 grad 0 [1]                      t = 9   1->0 grad 1 [1]
//   t = 11  0->1 grad 1 [1], 1->0 grad 0 [0]     t = 13  1->0 grad 1 [0]
TEST(MessageOrder, TwoChunksOnTwoRanksByHand) {
  const Schedule sc{"interleaved",
                    2,
                    2,
                    {{F(0), F(1), F(0, 1), F(1, 1), BW(0, 1), BW(1, 1), BW(0), BW(1)},
                     {F(0), F(1), F(0, 1), BW(0, 1), F(1, 1), BW(1, 1), BW(0), BW(1)}},
                    2};
  ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, Costs{1, 1, 1, 0}));
  const std::vector<Message> want = {{0, 1, true, 0, 0},  {0, 1, true, 1, 0},  {1, 0, true, 0, 0},
                                     {0, 1, true, 0, 1},  {1, 0, true, 1, 0},  {0, 1, true, 1, 1},
                                     {1, 0, false, 0, 1}, {0, 1, false, 0, 1}, {1, 0, false, 1, 1},
                                     {0, 1, false, 1, 1}, {1, 0, false, 0, 0}, {1, 0, false, 1, 0}};
  EXPECT_EQ(order, want);
}

}  // namespace
}  // namespace distlab::pipeline
