// Public test of Lab 5 stage C: the executor runs 1F1B on 2 ranks and gets the unpipelined gradients.
#include "labs/pipeline/executor.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

// The same problem through the executor twice: GPipe and 1F1B must agree on every gradient (they compute
// the same sums in the same order), and the timeline must follow the schedule.
//   rank 0: F0 F1 BW0 BW1        rank 1: F0 BW0 F1 BW1
TEST(RunPipeline, OneFOneBMatchesGPipeOnTwoRanks) {
  const PipelineProblem pr = MakeProblem(2, 2, 4, 3, 7);
  ASSERT_OK_AND_ASSIGN(Schedule gpipe, GPipe(2, 2));
  ASSERT_OK_AND_ASSIGN(Schedule onefoneb, OneFOneB(2, 2));
  ASSERT_OK_AND_ASSIGN(ExecResult a, RunPipeline(gpipe, pr, ExecutorOptions{}));
  ASSERT_OK_AND_ASSIGN(ExecResult b, RunPipeline(onefoneb, pr, ExecutorOptions{}));
  ASSERT_EQ(a.weight_grad.size(), 2u);
  ASSERT_EQ(b.weight_grad.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(a.weight_grad[s].size(), 16u);
    ASSERT_EQ(b.weight_grad[s].size(), 16u);
    for (int k = 0; k < 16; ++k) EXPECT_NEAR(a.weight_grad[s][k], b.weight_grad[s][k], 1e-6);
    ASSERT_EQ(b.timeline[s].size(), onefoneb.stages[s].size());
    for (size_t k = 0; k < b.timeline[s].size(); ++k) EXPECT_EQ(b.timeline[s][k].op, onefoneb.stages[s][k]);
  }
  EXPECT_NEAR(a.loss, b.loss, 1e-6);
  EXPECT_GT(a.loss, 0);
}

}  // namespace
}  // namespace distlab::pipeline
