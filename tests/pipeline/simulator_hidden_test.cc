// Hidden tests of Lab 5 stage A: the event simulator against hand-computed timelines and the closed forms.
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

constexpr double kEps = 1e-9;

TEST(Simulate, SingleStageHasNoBubble) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(1, 3));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 2, 0.5, 7}));
  EXPECT_NEAR(r.makespan, 3 * 3.5, kEps);
  EXPECT_NEAR(r.bubble, 0, kEps);
  EXPECT_NEAR(r.bubble_rate, 0, kEps);
  ASSERT_EQ(r.busy.size(), 1u);
  EXPECT_NEAR(r.busy[0], 10.5, kEps);
}

// GPipe, p = 2, m = 2, T_F = 1, T_B + T_W = 2:
//   stage 0: F0 [0,1] F1 [1,2]            BW0 [5,7] BW1 [7,9]
//   stage 1:       F0 [1,2] F1 [2,3] BW0 [3,5] BW1 [5,7]
TEST(Simulate, GPipeTimelineByHand) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(2, 2));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1.5, 0.5, 0}));
  EXPECT_NEAR(r.makespan, 9, kEps);
  ASSERT_EQ(r.timeline.size(), 2u);
  ASSERT_EQ(r.timeline[0].size(), 4u);
  ASSERT_EQ(r.timeline[1].size(), 4u);
  const double s0[4][2] = {{0, 1}, {1, 2}, {5, 7}, {7, 9}};
  const double s1[4][2] = {{1, 2}, {2, 3}, {3, 5}, {5, 7}};
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(r.timeline[0][k].start, s0[k][0], kEps) << k;
    EXPECT_NEAR(r.timeline[0][k].end, s0[k][1], kEps) << k;
    EXPECT_NEAR(r.timeline[1][k].start, s1[k][0], kEps) << k;
    EXPECT_NEAR(r.timeline[1][k].end, s1[k][1], kEps) << k;
    EXPECT_EQ(r.timeline[0][k].op, sc.stages[0][k]);
  }
  EXPECT_NEAR(r.first_start[1], 1, kEps);
  EXPECT_NEAR(r.last_end[1], 7, kEps);
  EXPECT_NEAR(r.idle[0], 3, kEps);
  EXPECT_NEAR(r.idle[1], 3, kEps);
}

// The communication latency delays every hop, forward and backward. p = 3, m = 1, T_F = T_B = 1, T_W = 0,
// comm = 0.5:  F on stages 0,1,2 at 0, 1.5, 3; BW on stages 2,1,0 at 4, 5.5, 7; makespan 8.
TEST(Simulate, CommLatencyOnEveryHop) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(3, 1));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 0, 0.5}));
  EXPECT_NEAR(r.makespan, 8, kEps);
  EXPECT_NEAR(r.timeline[1][0].start, 1.5, kEps);
  EXPECT_NEAR(r.timeline[2][0].start, 3, kEps);
  EXPECT_NEAR(r.timeline[1][1].start, 5.5, kEps);
  EXPECT_NEAR(r.timeline[0][1].start, 7, kEps);
}

TEST(Simulate, GPipeBubbleRateIsFormula) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {1, 4, 8, 13}) {
      for (Costs c : {Costs{1, 1, 1, 0}, Costs{1, 2, 0.5, 0}, Costs{3, 1, 2, 0}}) {
        ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(p, m));
        ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
        EXPECT_NEAR(r.bubble_rate, double(p - 1) / (m + p - 1), kEps) << "p=" << p << " m=" << m;
        EXPECT_NEAR(r.bubble_rate, GPipeBubbleFraction(p, m), kEps);
        for (int s = 0; s < p; ++s) EXPECT_EQ(r.peak_activations[s], m);
      }
    }
  }
}

// The seed's derivation: makespan m(F+B) + (p-1)(F+B) with B the fused backward; the last stage never
// waits once it has started, so its only idle time is the (p-1)(F+B) outside its span... and in it, none.
TEST(Simulate, OneFOneBMakespanIsSeedFormula) {
  for (int p : {2, 4, 5}) {
    for (int m : {2, 4, 8, 11}) {
      for (Costs c : {Costs{1, 1, 1, 0}, Costs{1, 1.5, 0.5, 0}, Costs{2, 1, 0.25, 0}}) {
        ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
        ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
        const double fb = c.forward + c.backward + c.weight;
        EXPECT_NEAR(r.makespan, m * fb + (p - 1) * fb, kEps) << "p=" << p << " m=" << m;
        EXPECT_NEAR(r.makespan, OneFOneBMakespan(p, m, c), kEps);
        EXPECT_NEAR(r.bubble, (p - 1) * fb, kEps);
        // The last stage: busy from its first op to its last.
        EXPECT_NEAR(r.last_end[p - 1] - r.first_start[p - 1], r.busy[p - 1], kEps);
        EXPECT_NEAR(r.first_start[p - 1], (p - 1) * c.forward, kEps);
      }
    }
  }
}

TEST(Simulate, OneFOneBPeakActivationsPerStage) {
  for (int p : {2, 4, 6}) {
    for (int m : {1, 3, 12}) {
      ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
      ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
      ASSERT_EQ(static_cast<int>(r.peak_activations.size()), p);
      for (int s = 0; s < p; ++s) EXPECT_EQ(r.peak_activations[s], std::min(p - s, m)) << "s=" << s;
    }
  }
}

// Activations count from the start of F to the end of B: W holds none of them.
//   F0 F1 B0 B1 W0 W1  -> 2 at once
//   F0 B0 F1 W0 B1 W1  -> 1 at once (microbatch 0 is gone when F1 starts, though W0 is still to come)
TEST(Simulate, MemoryCountedFromForwardToInputGradient) {
  ASSERT_OK_AND_ASSIGN(
      SimResult a, Simulate(Schedule{"a", 1, 2, {{F(0), F(1), B(0), B(1), W(0), W(1)}}}, Costs{1, 1, 1, 0}));
  EXPECT_EQ(a.peak_activations[0], 2);
  ASSERT_OK_AND_ASSIGN(
      SimResult b, Simulate(Schedule{"b", 1, 2, {{F(0), B(0), F(1), W(0), B(1), W(1)}}}, Costs{1, 1, 1, 0}));
  EXPECT_EQ(b.peak_activations[0], 1);
}

TEST(Simulate, BusyIdleAndTimelineOrder) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(4, 6));
  const Costs c{1, 2, 1, 0.25};
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
  for (int s = 0; s < 4; ++s) {
    EXPECT_NEAR(r.busy[s], 6 * 4.0, kEps);
    EXPECT_NEAR(r.idle[s], r.makespan - r.busy[s], kEps);
    ASSERT_EQ(r.timeline[s].size(), sc.stages[s].size());
    for (size_t k = 0; k < r.timeline[s].size(); ++k) {
      EXPECT_EQ(r.timeline[s][k].op, sc.stages[s][k]);
      if (k > 0) {
        EXPECT_GE(r.timeline[s][k].start, r.timeline[s][k - 1].end - kEps);
      }
    }
    EXPECT_NEAR(r.first_start[s], s * (1 + 0.25), kEps);
  }
  EXPECT_NEAR(r.bubble_rate, (r.makespan - 24) / r.makespan, kEps);
}

TEST(Simulate, RejectsInvalidInput) {
  EXPECT_EQ(Simulate(Schedule{"x", 1, 1, {{BW(0), F(0)}}}, Costs{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(2, 2));
  EXPECT_EQ(Simulate(sc, Costs{0, 1, 1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Simulate(sc, Costs{1, 1, 1, -1}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Interleaved, p = 2, v = 2, m = 1, F = 1, BW = 2, comm = 0.5 on every rank-to-rank hop:
//   rank 0: F0 [0,1]      F0.1 [3,4]                BW0.1 [8,10]               BW0 [13,15]
//   rank 1:   F0 [1.5,2.5]     F0.1 [4.5,5.5] BW0.1 [5.5,7.5]      BW0 [10.5,12.5]
// (the activation of chunk 0 on rank 1 goes on to chunk 1 on rank 0). One rank with two chunks pays no
// comm between them.
TEST(Simulate, InterleavedFollowsVirtualStages) {
  const Schedule sc{"x", 2, 1, {{F(0), F(0, 1), BW(0, 1), BW(0)}, {F(0), F(0, 1), BW(0, 1), BW(0)}}, 2};
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0.5}));
  ASSERT_EQ(r.timeline.size(), 2u);
  const std::vector<double> start0 = {0, 3, 8, 13}, start1 = {1.5, 4.5, 5.5, 10.5};
  for (int k = 0; k < 4; ++k) {
    EXPECT_DOUBLE_EQ(r.timeline[0][k].start, start0[k]) << "rank 0 " << ToString(r.timeline[0][k].op);
    EXPECT_DOUBLE_EQ(r.timeline[1][k].start, start1[k]) << "rank 1 " << ToString(r.timeline[1][k].op);
  }
  EXPECT_DOUBLE_EQ(r.makespan, 15);
  EXPECT_DOUBLE_EQ(r.busy[0], 6);
  // Ideal step v m (F+B+W) = 6 per rank.
  EXPECT_DOUBLE_EQ(r.bubble_rate, (15.0 - 6.0) / 15.0);
  EXPECT_EQ(r.peak_activations, (std::vector<int>{2, 2}));
  const Schedule one{"x", 1, 1, {{F(0), F(0, 1), BW(0, 1), BW(0)}}, 2};
  ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(one, Costs{1, 1, 1, 5}));
  EXPECT_DOUBLE_EQ(r1.makespan, 6);
  EXPECT_DOUBLE_EQ(r1.bubble_rate, 0);
}

}  // namespace
}  // namespace distlab::pipeline
