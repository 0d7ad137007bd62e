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

std::string Row(const Schedule& sc, int s) {
  std::string out;
  for (const Op& op : sc.stages[s]) out += (out.empty() ? "" : " ") + ToString(op);
  return out;
}

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

// Table 2 holds while T_W <= T_F. Above it the fixed orders have no more gaps for W to fill: ZB-H1's bubble
// stays at stage 0's wait for B0, (p-1) T_B, which the formula (p-1)(T_F+T_B-T_W) undercuts, and ZB-H2's is
// (p-1) max(0, T_B - T_F), where the formula goes negative. Both are Table 2 with T_W replaced by
// min(T_W, T_F).
TEST(ZeroBubble, TableTwoHoldsUpToTWEqualsTF) {
  const std::vector<Costs> heavy_w = {{1, 1, 2, 0}, {1, 2, 3, 0}, {1, 3, 2, 0}, {2, 1, 3, 0}, {1, 2, 1.5, 0}};
  for (const Point& pt : kPoints) {
    ASSERT_OK_AND_ASSIGN(Schedule h1, ZeroBubbleH1(pt.p, pt.m));
    ASSERT_OK_AND_ASSIGN(Schedule h2, ZeroBubbleH2(pt.p, pt.m));
    for (const Costs& c : heavy_w) {
      ASSERT_OK_AND_ASSIGN(SimResult r1, Simulate(h1, c));
      ASSERT_OK_AND_ASSIGN(SimResult r2, Simulate(h2, c));
      const std::string at = "p=" + std::to_string(pt.p) + " m=" + std::to_string(pt.m) +
                             " T=" + std::to_string(c.forward) + "," + std::to_string(c.backward) + "," +
                             std::to_string(c.weight);
      EXPECT_NEAR(r1.bubble, (pt.p - 1) * c.backward, kEps) << at;
      EXPECT_GT(r1.bubble, ZeroBubbleTable2(Table2Schedule::kZeroBubbleH1, pt.p, c).bubble + kEps) << at;
      EXPECT_NEAR(r2.bubble, (pt.p - 1) * std::max(0.0, c.backward - c.forward), kEps) << at;
      EXPECT_GT(r2.bubble, ZeroBubbleTable2(Table2Schedule::kZeroBubbleH2, pt.p, c).bubble + kEps) << at;
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

// The tie-breaks of zero_bubble.h with comm > 0 (T_F = 1, T_B = 1.5, T_W = 0.5, comm = 0.5, limit 3): on
// stage 1, B2's gradient and F3's activation arrive together after W1 and B goes first; an input that
// arrives exactly when the stage is free counts as arrived.
TEST(GreedySplitSchedule, TieBreaksWithCommunication) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GreedySplitSchedule(3, 4, Costs{1, 1.5, 0.5, 0.5}, {3, 3, 3}));
  ASSERT_EQ(sc.stages.size(), 3u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 B0 F3 B1 W0 W1 B2 W2 B3 W3");
  EXPECT_EQ(Row(sc, 1), "F0 F1 F2 B0 W0 B1 W1 B2 F3 W2 B3 W3");
  EXPECT_EQ(Row(sc, 2), "F0 B0 F1 B1 F2 B2 W0 W1 W2 F3 B3 W3");
  // Unit costs, no comm: every arrival coincides with a free time.
  ASSERT_OK_AND_ASSIGN(Schedule h1, ZeroBubbleH1(2, 3));
  EXPECT_EQ(Row(h1, 0), "F0 F1 B0 F2 B1 W0 B2 W1 W2");
  EXPECT_EQ(Row(h1, 1), "F0 B0 F1 B1 F2 B2 W0 W1 W2");
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

// Rank s holds min(v m, 2(p-s-1) + (v-1)N + 1) chunk activations (units of M_B / v) for v > 1: rank 0 with
// p = 4, v = 2, N = p holds 11 chunks = 5.5 M_B, more than 1F1B's p = 4 -- the price of the smaller bubble.
// A larger group N costs (v-1)(N-p) more. With v = 1 it is 1F1B's min(m, p-s).
TEST(InterleavedOneFOneB, PeakActivationsPerRank) {
  struct Case {
    int p, m, group;
  };
  for (Case cs :
       std::vector<Case>{{2, 2, 0}, {2, 4, 0}, {4, 4, 0}, {4, 8, 0}, {3, 9, 0}, {3, 7, 4}, {2, 5, 5}}) {
    for (int v : {1, 2, 3}) {
      ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(cs.p, cs.m, v, cs.group));
      ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
      const int n = cs.group == 0 ? cs.p : cs.group;
      for (int s = 0; s < cs.p; ++s) {
        const int want =
            v == 1 ? std::min(cs.m, cs.p - s) : std::min(v * cs.m, 2 * (cs.p - s - 1) + (v - 1) * n + 1);
        const std::string at = "p=" + std::to_string(cs.p) + " m=" + std::to_string(cs.m) +
                               " N=" + std::to_string(n) + " v=" + std::to_string(v) +
                               " s=" + std::to_string(s);
        EXPECT_EQ(r.peak_activations[s], want) << at;
        EXPECT_EQ(ForwardsBeforeFirstBackward(sc.stages[s]), want) << at;
      }
    }
  }
}

// With v = 1 there is one chunk per rank: plain 1F1B, for any m (Megatron-LM runs its non-interleaved
// schedule for a virtual size of 1).
TEST(InterleavedOneFOneB, OneChunkIsPlainOneFOneB) {
  for (int p : {1, 2, 3, 5}) {
    for (int m : {1, 3, 7}) {
      ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(p, m, 1));
      ASSERT_OK_AND_ASSIGN(Schedule plain, OneFOneB(p, m));
      EXPECT_EQ(sc.v, 1);
      ASSERT_EQ(sc.stages.size(), plain.stages.size());
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(Row(sc, s), Row(plain, s)) << "p=" << p << " m=" << m << " s=" << s;
    }
  }
}

// Groups of N microbatches (Megatron-LM's microbatch group size). p = 2, m = 3, v = 2, N = 3: one group of 3
// through chunk 0, then through chunk 1; warm-up 2(p-s-1) + (v-1)N = 5 forwards on rank 0, 3 on rank 1.
TEST(InterleavedOneFOneB, GroupsOfNMicrobatches) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(2, 3, 2, 3));
  ASSERT_EQ(sc.stages.size(), 2u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 F0.1 F1.1 F2.1 BW0.1 BW1.1 BW2.1 BW0 BW1 BW2");
  EXPECT_EQ(Row(sc, 1), "F0 F1 F2 F0.1 BW0.1 F1.1 BW1.1 F2.1 BW2.1 BW0 BW1 BW2");
  EXPECT_OK(ValidateSchedule(sc));
  // Any valid (p, m, N): the bubble is still (p-1)(F+B+W)/v with per-chunk costs T/v.
  struct Case {
    int p, m, v, group;
  };
  for (Case cs : std::vector<Case>{{2, 3, 2, 3}, {3, 7, 2, 4}, {3, 8, 3, 5}, {4, 6, 2, 6}, {4, 11, 2, 7}}) {
    ASSERT_OK_AND_ASSIGN(Schedule g, InterleavedOneFOneB(cs.p, cs.m, cs.v, cs.group));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(g, Costs{1.0 / cs.v, 1.0 / cs.v, 1.0 / cs.v, 0}));
    EXPECT_NEAR(r.bubble, (cs.p - 1) * 3.0 / cs.v, 1e-9)
        << "p=" << cs.p << " m=" << cs.m << " v=" << cs.v << " N=" << cs.group;
  }
}

// v > 1 needs p <= N <= m and a last group of 0 or at least p microbatches (with the default N = p: m a
// multiple of p). A shorter last group would validate, but its round trip does not close in time.
TEST(InterleavedOneFOneB, RejectsALastGroupShorterThanP) {
  absl::StatusOr<Schedule> sc = InterleavedOneFOneB(4, 6, 2);
  ASSERT_EQ(sc.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(sc.status().message());
  EXPECT_NE(msg.find("multiple"), std::string::npos) << msg;
  EXPECT_EQ(InterleavedOneFOneB(3, 7, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterleavedOneFOneB(4, 10, 2, 4).status().code(), absl::StatusCode::kInvalidArgument)
      << "10 mod 4";
  EXPECT_EQ(InterleavedOneFOneB(4, 6, 2, 3).status().code(), absl::StatusCode::kInvalidArgument) << "N < p";
  EXPECT_EQ(InterleavedOneFOneB(4, 6, 2, 7).status().code(), absl::StatusCode::kInvalidArgument) << "N > m";
  EXPECT_EQ(InterleavedOneFOneB(4, 2, 2).status().code(), absl::StatusCode::kInvalidArgument) << "m < p";
  EXPECT_EQ(InterleavedOneFOneB(0, 4, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterleavedOneFOneB(2, 0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterleavedOneFOneB(2, 4, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_OK(InterleavedOneFOneB(3, 9, 2).status());
  EXPECT_OK(InterleavedOneFOneB(3, 7, 2, 4).status()) << "7 mod 4 = 3 >= p";
  EXPECT_OK(InterleavedOneFOneB(3, 7, 1).status()) << "v = 1: any m";
}

TEST(InterleavedOneFOneB, ClosedForm) {
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(4, 8, 1), 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(4, 8, 2), 3.0 / 16.0);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(8, 16, 4), 7.0 / 64.0);
  EXPECT_DOUBLE_EQ(InterleavedBubbleFraction(1, 5, 3), 0.0);
}

}  // namespace
}  // namespace distlab::pipeline
