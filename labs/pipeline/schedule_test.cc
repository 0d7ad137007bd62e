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
