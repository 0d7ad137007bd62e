// Public tests of Lab 5 stage A: schedules, the validator, the simulator. Run: bazel test //labs/pipeline/...
#include "labs/pipeline/schedule.h"

#include <algorithm>
#include <string>
#include <vector>

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
  // The same rule at a few p and m drawn from the grading seed (--test_env=DISTLAB_GRADING_SEED=S draws
  // others): min(p-s-1, m) warm-up forwards, so min(p-s, m) forwards before stage s's first BW.
  distlab::testing::CaseRandom rnd;
  for (int draw = 0; draw < 4; ++draw) {
    const int p = rnd.Int(1, 8);
    const int m = rnd.Int(1, 12);
    ASSERT_OK_AND_ASSIGN(Schedule drawn, OneFOneB(p, m));
    ASSERT_EQ(static_cast<int>(drawn.stages.size()), p);
    EXPECT_OK(ValidateSchedule(drawn)) << "OneFOneB(" << p << ", " << m << ")";
    for (int s = 0; s < p; ++s) {
      int forwards = 0;
      while (forwards < static_cast<int>(drawn.stages[s].size()) &&
             drawn.stages[s][forwards].kind == OpKind::kForward) {
        ++forwards;
      }
      EXPECT_EQ(forwards, std::min(p - s, m))
          << "OneFOneB(" << p << ", " << m << "), stage " << s << ": forwards before the first BW; "
          << distlab::testing::SeedNote();
    }
  }
}

// A worked example: every row of 1F1B for p = 3 stages and m = 4 microbatches.
//   stage 0: F0 F1 F2 BW0 F3 BW1 BW2 BW3     warm-up F0 F1, then F2 BW0, F3 BW1, then the cool-down
//   stage 1: F0 F1 BW0 F2 BW1 F3 BW2 BW3     warm-up F0, then F1 BW0, F2 BW1, F3 BW2, then BW3
//   stage 2: F0 BW0 F1 BW1 F2 BW2 F3 BW3     no warm-up: the last stage's backward needs only its own F
// Stage s never holds more than p-s microbatches between F and BW (3, 2 and 1 here).
TEST(OneFOneB, RowsOfThreeStagesAndFourMicrobatches) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(3, 4));
  EXPECT_EQ(sc.name, "1F1B");
  EXPECT_EQ(sc.p, 3);
  EXPECT_EQ(sc.m, 4);
  ASSERT_EQ(sc.stages.size(), 3u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 BW0 F3 BW1 BW2 BW3");
  EXPECT_EQ(Row(sc, 1), "F0 F1 BW0 F2 BW1 F3 BW2 BW3");
  EXPECT_EQ(Row(sc, 2), "F0 BW0 F1 BW1 F2 BW2 F3 BW3");
  EXPECT_OK(ValidateSchedule(sc));
  EXPECT_EQ(OneFOneB(0, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

// GPipe, p = 2, m = 3: every stage runs all its forwards, then all its backwards.
//   stage 0: F0 F1 F2 BW0 BW1 BW2
//   stage 1: F0 F1 F2 BW0 BW1 BW2
TEST(GPipe, RowsOfTwoStagesAndThreeMicrobatches) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(2, 3));
  EXPECT_EQ(sc.name, "GPipe");
  ASSERT_EQ(sc.stages.size(), 2u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 BW0 BW1 BW2");
  EXPECT_EQ(Row(sc, 1), "F0 F1 F2 BW0 BW1 BW2");
  EXPECT_OK(ValidateSchedule(sc));
  EXPECT_EQ(GPipe(2, 0).status().code(), absl::StatusCode::kInvalidArgument);
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

// A worked example of the simulator: 1F1B, p = 3, m = 4, T_F = 1, T_B = 1.5, T_W = 0.5 (a BW costs 2),
// comm = 0. Each op starts when its stage is free and its input has arrived:
//   stage 0: F0 [0,1]  F1 [1,2]  F2 [2,3]  BW0 [7,9]  F3 [9,10]  BW1 [10,12]  BW2 [13,15]  BW3 [16,18]
//   stage 1: F0 [1,2]  F1 [2,3]  BW0 [5,7]  F2 [7,8]  BW1 [8,10]  F3 [10,11]  BW2 [11,13]  BW3 [14,16]
//   stage 2: F0 [2,3]  BW0 [3,5]  F1 [5,6]  BW1 [6,8]  F2 [8,9]  BW2 [9,11]  F3 [11,12]  BW3 [12,14]
// Stage 2 starts at 2 and is never idle until 14; stage 0 ends last, at 18. Each stage is busy 12, so
// bubble = max_s (last end - first start - busy) = 18 - 0 - 12 = 6 (stage 0), bubble_rate = 6 / 18.
TEST(Simulate, OneFOneBTimelineByHand) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(3, 4));
  const Costs costs{1, 1.5, 0.5, 0};
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, costs));
  const std::vector<std::vector<double>> start = {
      {0, 1, 2, 7, 9, 10, 13, 16}, {1, 2, 5, 7, 8, 10, 11, 14}, {2, 3, 5, 6, 8, 9, 11, 12}};
  ASSERT_EQ(r.timeline.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(r.timeline[s].size(), 8u) << "stage " << s;
    for (int k = 0; k < 8; ++k) {
      const TimedOp& t = r.timeline[s][k];
      EXPECT_EQ(t.op, sc.stages[s][k]) << "stage " << s << " op " << k;
      EXPECT_DOUBLE_EQ(t.start, start[s][k]) << "stage " << s << " " << ToString(t.op);
      EXPECT_DOUBLE_EQ(t.end, start[s][k] + (t.op.kind == OpKind::kForward ? 1 : 2))
          << "stage " << s << " " << ToString(t.op);
    }
    EXPECT_DOUBLE_EQ(r.busy[s], 12) << "stage " << s;
  }
  EXPECT_DOUBLE_EQ(r.makespan, 18);
  EXPECT_DOUBLE_EQ(r.first_start[2], 2);
  EXPECT_DOUBLE_EQ(r.last_end[2], 14);
  EXPECT_DOUBLE_EQ(r.bubble, 6);
  EXPECT_DOUBLE_EQ(r.bubble_rate, 6.0 / 18.0);
  EXPECT_EQ(r.peak_activations, (std::vector<int>{3, 2, 1}));
  EXPECT_DOUBLE_EQ(OneFOneBMakespan(3, 4, costs), 18);
}

// 1F1B, p = 4, m = 8, T_F = 1, T_B + T_W = 2: the last stage starts at 3 and never waits; the makespan is
// 33 (notes/05-pipeline.md, the table of section 6).
//   stage 3: ...|F0|BW0 |F1|BW1 |...
TEST(Simulate, OneFOneBMakespanIsSeedFormula) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(4, 8));
  const Costs costs{1, 1.5, 0.5, 0};
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, costs));
  EXPECT_DOUBLE_EQ(r.makespan, 33);
  EXPECT_DOUBLE_EQ(OneFOneBMakespan(4, 8, costs), 33);
  EXPECT_EQ(r.peak_activations[0], 4);  // p - s microbatches in flight on stage s
  EXPECT_EQ(r.peak_activations[3], 1);
  // 36 more points drawn from the grading seed: the hidden test of this name draws the very same p, m and
  // costs, so `bazel test //labs/pipeline:schedule_test --test_env=DISTLAB_GRADING_SEED=S` replays the seed S
  // that a hidden failure names. Here the simulator and OneFOneBMakespan must agree, bubble = makespan - m
  // (T_F+T_B+T_W) (simulator.h), and the last stage starts at (p-1) T_F and then never waits (section 3).
  distlab::testing::CaseRandom rnd;
  const int p_range[3][2] = {{2, 3}, {4, 5}, {6, 8}}, m_range[4][2] = {{1, 3}, {4, 6}, {7, 10}, {11, 16}};
  std::vector<int> ps, ms;
  for (const auto& r : p_range) ps.push_back(rnd.Int(r[0], r[1]));
  for (const auto& r : m_range) ms.push_back(rnd.Int(r[0], r[1]));
  std::vector<Costs> drawn_costs(3);
  for (Costs& c : drawn_costs) {
    c.forward = 0.25 * rnd.Int(1, 12);
    c.backward = 0.25 * rnd.Int(1, 12);
    c.weight = 0.25 * rnd.Int(1, 12);
  }
  for (int p : ps) {
    for (int m : ms) {
      for (const Costs& c : drawn_costs) {
        SCOPED_TRACE("OneFOneB(" + std::to_string(p) + ", " + std::to_string(m) +
                     ") at T_F = " + std::to_string(c.forward) + ", T_B = " + std::to_string(c.backward) +
                     ", T_W = " + std::to_string(c.weight) + "; " + distlab::testing::SeedNote());
        ASSERT_OK_AND_ASSIGN(Schedule drawn, OneFOneB(p, m));
        ASSERT_OK_AND_ASSIGN(SimResult sim, Simulate(drawn, c));
        EXPECT_NEAR(sim.makespan, OneFOneBMakespan(p, m, c), 1e-9);
        EXPECT_NEAR(sim.bubble, sim.makespan - m * (c.forward + c.backward + c.weight), 1e-9);
        EXPECT_NEAR(sim.first_start[p - 1], (p - 1) * c.forward, 1e-9);
        EXPECT_NEAR(sim.last_end[p - 1] - sim.first_start[p - 1], sim.busy[p - 1], 1e-9);
      }
    }
  }
}

// GPipe, p = 3, m = 2, T_F = 1, T_B = 1.5, T_W = 0.5 (a BW costs 2), comm = 0:
//   stage 0: F0 [0,1]  F1 [1,2]  BW0 [8,10]  BW1 [10,12]
//   stage 1: F0 [1,2]  F1 [2,3]  BW0 [6,8]   BW1 [8,10]
//   stage 2: F0 [2,3]  F1 [3,4]  BW0 [4,6]   BW1 [6,8]
// Every stage works 6 of the makespan 12 and idles the other 6: its share of the step idle is 6 / 12.
// GPipeBubbleFraction is that share (idle time over the makespan) as a closed form in p and m; for p = 4,
// m = 8 it is 3/11.
TEST(Simulate, GPipeBubbleFraction) {
  ASSERT_OK_AND_ASSIGN(Schedule small, GPipe(3, 2));
  ASSERT_OK_AND_ASSIGN(SimResult r3, Simulate(small, Costs{1, 1.5, 0.5, 0}));
  EXPECT_DOUBLE_EQ(r3.makespan, 12);
  for (int stage = 0; stage < 3; ++stage) EXPECT_DOUBLE_EQ(r3.idle[stage], 6) << "stage " << stage;
  EXPECT_DOUBLE_EQ(r3.timeline[0][2].start, 8);
  EXPECT_DOUBLE_EQ(r3.bubble_rate, 0.5);
  EXPECT_DOUBLE_EQ(GPipeBubbleFraction(3, 2), 0.5);
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(4, 8));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
  EXPECT_NEAR(r.bubble_rate, 3.0 / 11.0, 1e-12);
  EXPECT_NEAR(GPipeBubbleFraction(4, 8), 3.0 / 11.0, 1e-12);
  EXPECT_EQ(r.peak_activations[0], 8);  // all m microbatches are held before the first backward
}

}  // namespace
}  // namespace distlab::pipeline
