// Hidden tests of Lab 5 stage B: ZB-H1 and ZB-H2 reproduce the Zero Bubble paper's Table 2 in the simulator;
// the greedy scheduler respects its memory limit. Table 2 assumes comm = 0 and m >= 2p - 1.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

constexpr double kEps = 1e-9;

struct Point {
  int p, m;
};
const std::vector<Point> kPoints = {{2, 4}, {3, 6}, {4, 8}, {4, 12}, {5, 10}, {6, 16}};
const std::vector<Costs> kCosts = {{1, 1, 1, 0}, {2, 2, 2, 0},       {2, 2, 1, 0}, {3, 2, 1, 0},
                                   {1, 2, 1, 0}, {1.5, 1.5, 0.5, 0}, {2, 1, 1, 0}};

int ForwardsBeforeFirstBackward(const std::vector<Op>& ops) {
  int n = 0;
  for (const Op& op : ops) {
    if (op.kind != OpKind::kForward) break;
    ++n;
  }
  return n;
}

void ExpectSplitAndValid(const Schedule& sc, int p, int m) {
  EXPECT_EQ(sc.p, p);
  EXPECT_EQ(sc.m, m);
  EXPECT_OK(ValidateSchedule(sc));
  ASSERT_EQ(static_cast<int>(sc.stages.size()), p);
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(static_cast<int>(sc.stages[s].size()), 3 * m) << "stage " << s;
    for (const Op& op : sc.stages[s]) EXPECT_NE(op.kind, OpKind::kFullBackward) << "stage " << s;
  }
}

TEST(ZeroBubbleH1, Table2BubbleAndMemory) {
  for (const Point& pt : kPoints) {
    ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(pt.p, pt.m));
    ExpectSplitAndValid(sc, pt.p, pt.m);
    for (const Costs& c : kCosts) {
      ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
      const double want = (pt.p - 1) * (c.forward + c.backward - c.weight);
      EXPECT_NEAR(r.bubble, want, kEps)
          << "p=" << pt.p << " m=" << pt.m << " T=" << c.forward << "," << c.backward << "," << c.weight;
      EXPECT_EQ(r.peak_activations[0], pt.p);
      for (int s = 0; s < pt.p; ++s) EXPECT_LE(r.peak_activations[s], pt.p - s);
    }
  }
}

TEST(ZeroBubbleH2, Table2BubbleAndMemory) {
  for (const Point& pt : kPoints) {
    ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(pt.p, pt.m));
    ExpectSplitAndValid(sc, pt.p, pt.m);
    for (const Costs& c : kCosts) {
      ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
      const double want = (pt.p - 1) * (c.forward + c.backward - 2 * c.weight);
      EXPECT_NEAR(r.bubble, want, kEps)
          << "p=" << pt.p << " m=" << pt.m << " T=" << c.forward << "," << c.backward << "," << c.weight;
      EXPECT_EQ(r.peak_activations[0], 2 * pt.p - 1);
    }
  }
}

TEST(ZeroBubbleH1, AThirdOfOneFOneBWhenCostsAreEqual) {
  for (const Point& pt : kPoints) {
    for (double t : {1.0, 2.5}) {
      const Costs c{t, t, t, 0};
      ASSERT_OK_AND_ASSIGN(Schedule h1, ZeroBubbleH1(pt.p, pt.m));
      ASSERT_OK_AND_ASSIGN(Schedule base, OneFOneB(pt.p, pt.m));
      ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(h1, c));
      ASSERT_OK_AND_ASSIGN(SimResult r0, Simulate(base, c));
      EXPECT_NEAR(3 * r1.bubble, r0.bubble, kEps) << "p=" << pt.p << " m=" << pt.m;
      EXPECT_EQ(r1.peak_activations, r0.peak_activations);
    }
  }
}

TEST(ZeroBubbleH1, WarmUpLikeOneFOneB) {
  for (const Point& pt : kPoints) {
    ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(pt.p, pt.m));
    ASSERT_EQ(static_cast<int>(sc.stages.size()), pt.p);
    for (int s = 0; s < pt.p; ++s) EXPECT_EQ(ForwardsBeforeFirstBackward(sc.stages[s]), pt.p - s) << s;
  }
}

// ZB-H2's extra warm-up: stage s runs 2(p-s)-1 forwards before its first B.
TEST(ZeroBubbleH2, ExtraWarmUpForwards) {
  for (const Point& pt : kPoints) {
    ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(pt.p, pt.m));
    ASSERT_EQ(static_cast<int>(sc.stages.size()), pt.p);
    for (int s = 0; s < pt.p; ++s) {
      EXPECT_EQ(ForwardsBeforeFirstBackward(sc.stages[s]), 2 * (pt.p - s) - 1) << "p=" << pt.p << " s=" << s;
    }
  }
}

// Zero bubble per stage, but one step still has the fill: the last stage starts (p-1) T_F late, so a step
// that ends with an optimizer synchronisation keeps a bubble rate of (p-1) T_F / makespan.
TEST(ZeroBubbleH2, OneStepStillHasTheFill) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(4, 8));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
  EXPECT_NEAR(r.bubble, 0, kEps);
  EXPECT_NEAR(r.makespan, 8 * 3 + 3, kEps);
  EXPECT_NEAR(r.bubble_rate, 3.0 / 27.0, kEps);
  for (int s = 0; s < 4; ++s) {
    EXPECT_NEAR(r.first_start[s], s, kEps);
    EXPECT_NEAR(r.last_end[s], s + 24, kEps);  // a parallelogram: every stage ends s T_F after stage 0
  }
}

TEST(Table2, Formulas) {
  const Costs c{3, 2, 1, 0};
  Table2Row a = ZeroBubbleTable2(Table2Schedule::kOneFOneB, 5, c);
  Table2Row b = ZeroBubbleTable2(Table2Schedule::kZeroBubbleH1, 5, c);
  Table2Row d = ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, 5, c);
  EXPECT_NEAR(a.bubble, 24, kEps);
  EXPECT_NEAR(b.bubble, 16, kEps);
  EXPECT_NEAR(d.bubble, 12, kEps);
  EXPECT_EQ(a.peak_activations, 5);
  EXPECT_EQ(b.peak_activations, 5);
  EXPECT_EQ(d.peak_activations, 9);
  EXPECT_NEAR(ZeroBubbleTable2(Table2Schedule::kZeroBubbleH1, 2, Costs{1, 1, 1, 0}).bubble, 1, kEps);
}

TEST(Table2, SimulatorAgreesWithFormulaFunction) {
  for (const Point& pt : kPoints) {
    for (const Costs& c : kCosts) {
      ASSERT_OK_AND_ASSIGN(Schedule base, OneFOneB(pt.p, pt.m));
      ASSERT_OK_AND_ASSIGN(Schedule h1, ZeroBubbleH1(pt.p, pt.m));
      ASSERT_OK_AND_ASSIGN(Schedule h2, ZeroBubbleH2(pt.p, pt.m));
      ASSERT_OK_AND_ASSIGN(SimResult r0, Simulate(base, c));
      ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(h1, c));
      ASSERT_OK_AND_ASSIGN(SimResult r2, Simulate(h2, c));
      EXPECT_NEAR(r0.bubble, ZeroBubbleTable2(Table2Schedule::kOneFOneB, pt.p, c).bubble, kEps);
      EXPECT_NEAR(r1.bubble, ZeroBubbleTable2(Table2Schedule::kZeroBubbleH1, pt.p, c).bubble, kEps);
      EXPECT_NEAR(r2.bubble, ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, pt.p, c).bubble, kEps);
      EXPECT_EQ(r2.peak_activations[0],
                ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, pt.p, c).peak_activations);
    }
  }
}

TEST(GreedySplitSchedule, RejectsBadArguments) {
  EXPECT_EQ(GreedySplitSchedule(0, 4, Costs{}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GreedySplitSchedule(2, 4, Costs{}, {2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GreedySplitSchedule(2, 4, Costs{}, {2, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GreedySplitSchedule(2, 0, Costs{}, {2, 1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GreedySplitSchedule, RespectsItsMemoryLimit) {
  for (int limit : {1, 2, 3, 5}) {
    const std::vector<int> limits = {limit, limit + 1, 1, limit};
    ASSERT_OK_AND_ASSIGN(Schedule sc, GreedySplitSchedule(4, 9, Costs{1, 1.5, 0.5, 0.1}, limits));
    ExpectSplitAndValid(sc, 4, 9);
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1.5, 0.5, 0.1}));
    for (int s = 0; s < 4; ++s) EXPECT_LE(r.peak_activations[s], limits[s]) << "s=" << s;
  }
}

// Stretch: with the real costs, the greedy scheduler is at least as good as the handcrafted schedule of
// the same memory (ZB-1p vs ZB-H1, ZB-2p vs ZB-H2).
TEST(ZeroBubbleGreedy, NoWorseThanHandcraftedAtTheSameMemory) {
  for (const Point& pt : kPoints) {
    for (const Costs& c : kCosts) {
      ASSERT_OK_AND_ASSIGN(Schedule g1, ZeroBubbleGreedy(pt.p, pt.m, c, pt.p));
      ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(g1, c));
      EXPECT_LE(r1.bubble, (pt.p - 1) * (c.forward + c.backward - c.weight) + kEps);
      for (int s = 0; s < pt.p; ++s) EXPECT_LE(r1.peak_activations[s], pt.p);
      ASSERT_OK_AND_ASSIGN(Schedule g2, ZeroBubbleGreedy(pt.p, pt.m, c, 2 * pt.p));
      ASSERT_OK_AND_ASSIGN(SimResult r2, Simulate(g2, c));
      EXPECT_LE(r2.bubble, std::max(0.0, (pt.p - 1) * (c.forward + c.backward - 2 * c.weight)) + kEps);
      for (int s = 0; s < pt.p; ++s) EXPECT_LE(r2.peak_activations[s], 2 * pt.p);
    }
  }
}

// ----- Stretch: interleaved 1F1B (v model chunks per rank) -----

std::string Row(const Schedule& sc, int s) {
  std::string out;
  for (const Op& op : sc.stages[s]) out += (out.empty() ? "" : " ") + ToString(op);
  return out;
}

// p = 2, m = 4, v = 2 (virtual stages: 0 = rank 0 chunk 0, 1 = rank 1 chunk 0, 2 = rank 0 chunk 1, 3 = rank 1
// chunk 1). Forwards in groups of p = 2 microbatches per chunk; backwards with the chunks reversed.
// Warm-up 2(p-s-1) + (v-1)p: 4 forwards on rank 0, 2 on rank 1.
TEST(InterleavedOneFOneB, MatchesTheDrawnSchedule) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(2, 4, 2));
  EXPECT_EQ(sc.p, 2);
  EXPECT_EQ(sc.m, 4);
  EXPECT_EQ(sc.v, 2);
  ASSERT_EQ(sc.stages.size(), 2u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F0.1 F1.1 F2 BW0.1 F3 BW1.1 F2.1 BW0 F3.1 BW1 BW2.1 BW3.1 BW2 BW3");
  EXPECT_EQ(Row(sc, 1), "F0 F1 F0.1 BW0.1 F1.1 BW1.1 F2 BW0 F3 BW1 F2.1 BW2.1 F3.1 BW3.1 BW2 BW3");
  EXPECT_OK(ValidateSchedule(sc));
}

// With per-chunk op costs T/v (each chunk holds 1/v of a rank's layers), the fill and the drain shrink by v:
//   makespan = m (F+B+W) + (p-1)(F+B+W)/v,  bubble = (p-1)(F+B+W)/v,  bubble / ideal step = (p-1)/(v m).
TEST(InterleavedOneFOneB, BubbleShrinksByV) {
  const std::vector<Costs> costs = {{1, 1, 1, 0}, {1, 2, 0, 0}, {2, 3, 1, 0}};
  for (Point pt : std::vector<Point>{{2, 4}, {4, 8}, {4, 12}, {3, 6}, {8, 16}}) {
    for (int v : {1, 2, 3, 4}) {
      for (const Costs& c : costs) {
        ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(pt.p, pt.m, v));
        const Costs chunk{c.forward / v, c.backward / v, c.weight / v, 0};
        ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, chunk));
        const double t = c.forward + c.backward + c.weight, ideal = pt.m * t;
        const std::string at = "p=" + std::to_string(pt.p) + " m=" + std::to_string(pt.m) +
                               " v=" + std::to_string(v) + " T=" + std::to_string(t);
        EXPECT_NEAR(r.bubble, (pt.p - 1) * t / v, 1e-9 * ideal) << at;
        EXPECT_NEAR(r.makespan, ideal + (pt.p - 1) * t / v, 1e-9 * ideal) << at;
        EXPECT_NEAR((r.makespan - ideal) / ideal, InterleavedBubbleFraction(pt.p, pt.m, v), 1e-9) << at;
        EXPECT_NEAR(r.bubble_rate, (r.makespan - ideal) / r.makespan, 1e-9) << at;
      }
    }
  }
}

// Rank s holds min(v m, 2(p-s-1) + (v-1)p + 1) chunk activations (units of M_B / v): rank 0 with p = 4,
// v = 2 holds 11 chunks = 5.5 M_B, more than 1F1B's p = 4 -- the price of the smaller bubble.
TEST(InterleavedOneFOneB, PeakActivationsPerRank) {
  for (Point pt : std::vector<Point>{{2, 2}, {2, 4}, {4, 4}, {4, 8}, {3, 9}}) {
    for (int v : {1, 2, 3}) {
      ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(pt.p, pt.m, v));
      ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
      for (int s = 0; s < pt.p; ++s) {
        EXPECT_EQ(r.peak_activations[s], std::min(v * pt.m, 2 * (pt.p - s - 1) + (v - 1) * pt.p + 1))
            << "p=" << pt.p << " m=" << pt.m << " v=" << v << " s=" << s;
        EXPECT_EQ(ForwardsBeforeFirstBackward(sc.stages[s]),
                  std::min(v * pt.m, 2 * (pt.p - s - 1) + (v - 1) * pt.p + 1))
            << "p=" << pt.p << " m=" << pt.m << " v=" << v << " s=" << s;
      }
    }
  }
}

TEST(InterleavedOneFOneB, RejectsMNotAMultipleOfP) {
  absl::StatusOr<Schedule> sc = InterleavedOneFOneB(4, 6, 2);
  ASSERT_EQ(sc.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(sc.status().message());
  EXPECT_NE(msg.find("multiple"), std::string::npos) << msg;
  EXPECT_EQ(InterleavedOneFOneB(3, 7, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterleavedOneFOneB(0, 4, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterleavedOneFOneB(2, 0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterleavedOneFOneB(2, 4, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_OK(InterleavedOneFOneB(3, 9, 2).status());
}

TEST(InterleavedOneFOneB, ClosedForm) {
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(4, 8, 1), 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(4, 8, 2), 3.0 / 16.0);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(8, 16, 4), 7.0 / 64.0);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(1, 5, 3), 0.0);
}

}  // namespace
}  // namespace distlab::pipeline
