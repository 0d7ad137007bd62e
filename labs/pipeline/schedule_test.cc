// Public tests of Lab 5 stage A: schedules, the validator, the simulator. Run: bazel test //labs/pipeline/...
#include "labs/pipeline/schedule.h"

#include <string>

#include "gtest/gtest.h"
#include "labs/pipeline/simulator.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

std::string Row(const Schedule& sc, int s) {
  std::string out;
  for (const Op& op : sc.stages[s]) out += (out.empty() ? "" : " ") + ToString(op);
  return out;
}

// 1F1B, p = 4, m = 6. Stage s warms up with p-s-1 forwards, then alternates F and BW:
//   stage 0: F0 F1 F2 F3 BW0 F4 BW1 F5 BW2 BW3 BW4 BW5      (4 in flight after F3)
//   stage 3: F0 BW0 F1 BW1 F2 BW2 F3 BW3 F4 BW4 F5 BW5
TEST(OneFOneB, WarmUpIsPMinusSMinusOneForwards) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(4, 6));
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 F3 BW0 F4 BW1 F5 BW2 BW3 BW4 BW5");
  EXPECT_EQ(Row(sc, 3), "F0 BW0 F1 BW1 F2 BW2 F3 BW3 F4 BW4 F5 BW5");
  EXPECT_OK(ValidateSchedule(sc));
}

// A backward placed before its own forward breaks "B i on s after F i on s"; the error says where.
TEST(ValidateSchedule, NamesABackwardBeforeItsForward) {
  Schedule sc{"bad", 1, 2, {{F(0), BW(1), BW(0), F(1)}}};
  absl::Status st = ValidateSchedule(sc);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("BW1"), std::string::npos) << st;
  EXPECT_NE(std::string(st.message()).find("F1"), std::string::npos) << st;
}

// Stage 1 starts with F1, which stage 0 sends only after its BW0, which waits for the gradient of stage 1's
// BW0, which stage 1 runs only after F1:
//   stage 0: F0 [BW0 <- stage 1] F1 BW1
//   stage 1: [F1 <- stage 0] F0 BW0 BW1
// Each list is fine on its own. The error names every stuck stage, its position, its op and what it waits
// for (schedule.h gives the exact wording).
TEST(ValidateSchedule, NamesEveryStuckStageOfADeadlock) {
  Schedule sc{"stuck", 2, 2, {{F(0), BW(0), F(1), BW(1)}, {F(1), F(0), BW(0), BW(1)}}};
  absl::Status st = ValidateSchedule(sc);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      st.message(),
      "invalid schedule: deadlock: stage 0 waits at position 1 (BW0) for the backward of microbatch 0 on "
      "stage 1; stage 1 waits at position 0 (F1) for F1 on stage 0; reorder so that each dependency runs "
      "first");
}

// A weight gradient may cost nothing (T_W = 0): W ops take no time and BW costs T_B. Negative costs and a
// zero T_F or T_B are errors. One stage, F = 1, B = 2, W = 0:
//   F0 [0,1]  B0 [1,3]  W0 [3,3]  F1 [3,4]  B1 [4,6]  W1 [6,6]
TEST(Simulate, ZeroCostWeightGradientIsAllowed) {
  Schedule sc{"split", 1, 2, {{F(0), B(0), W(0), F(1), B(1), W(1)}}};
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 2, 0, 0}));
  EXPECT_DOUBLE_EQ(r.makespan, 6);
  EXPECT_DOUBLE_EQ(r.busy[0], 6);
  ASSERT_EQ(r.timeline[0].size(), 6u);
  EXPECT_DOUBLE_EQ(r.timeline[0][2].start, 3);
  EXPECT_DOUBLE_EQ(r.timeline[0][2].end, 3);
  EXPECT_EQ(Simulate(sc, Costs{1, 2, -1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Simulate(sc, Costs{1, 0, 1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Simulate(sc, Costs{0, 1, 1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

// 1F1B with T_F = 1, T_B + T_W = 2, p = 4, m = 8: the last stage starts at 3 and never waits, so
//   makespan = m (F+B) + (p-1)(F+B) = 24 + 9 = 33.
//   stage 3: ...|F0|BW0 |F1|BW1 |...
TEST(Simulate, OneFOneBMakespanIsSeedFormula) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(4, 8));
  const Costs costs{1, 1.5, 0.5, 0};
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, costs));
  EXPECT_DOUBLE_EQ(r.makespan, 33);
  EXPECT_DOUBLE_EQ(OneFOneBMakespan(4, 8, costs), 33);
  EXPECT_EQ(r.peak_activations[0], 4);  // p - s microbatches in flight on stage s
  EXPECT_EQ(r.peak_activations[3], 1);
}

// GPipe: bubble fraction (p-1)/(m+p-1) = 3/11 for p = 4, m = 8.
TEST(Simulate, GPipeBubbleFraction) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(4, 8));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
  EXPECT_NEAR(r.bubble_rate, 3.0 / 11.0, 1e-12);
  EXPECT_NEAR(GPipeBubbleFraction(4, 8), 3.0 / 11.0, 1e-12);
  EXPECT_EQ(r.peak_activations[0], 8);  // all m microbatches are held before the first backward
}

}  // namespace
}  // namespace distlab::pipeline
