// Hidden tests of Lab 5 stage A: the event simulator against a brute-force timeline and the closed forms.
//
// Every case draws its schedules, p, m and costs from the grading seed (test_util.h). A timeline is checked
// op by op against simulator.h's rule -- an op starts at the later of its stage's previous op's end and its
// input's arrival -- using the simulator's own times, in the order a brute-force simulation places the ops,
// so a failure names the first op that breaks the rule and the two times it should have waited for.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "tests/pipeline/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

using test::CaseRandom;
using test::CostsText;
using test::Drawn;
using test::Near;
using test::Num;
using test::ScheduleText;

constexpr double kEps = 1e-9;

std::string PM(int p, int m) { return "p = " + std::to_string(p) + ", m = " + std::to_string(m); }

// Costs in quarters: T_F, T_B in [lo, hi] / 4, T_W in [w_lo, hi] / 4, comm as given.
Costs DrawCosts(CaseRandom& rnd, int lo, int hi, int w_lo, double comm) {
  const double f = test::Quarters(rnd, lo, hi), b = test::Quarters(rnd, lo, hi),
               w = test::Quarters(rnd, w_lo, hi);
  return Costs{f, b, w, comm};
}

// GPipe's rows written out here, so that the simulator's cases do not depend on the generator.
Schedule GPipeRows(int p, int m) {
  Schedule sc{"GPipe", p, m, std::vector<std::vector<Op>>(p)};
  for (int s = 0; s < p; ++s) {
    for (int i = 0; i < m; ++i) sc.stages[s].push_back(F(i));
    for (int i = 0; i < m; ++i) sc.stages[s].push_back(BW(i));
  }
  return sc;
}

// The timeline of `r` follows the schedule and simulator.h's rule, op by op, in the order a brute-force
// simulation places the ops: the first op that breaks it is named with the times it waits for, read from
// `r`'s own timeline. Returns false after the first failure.
bool ExpectTimelineFollowsTheRule(const Schedule& sc, const Costs& c, const SimResult& r) {
  if (static_cast<int>(r.timeline.size()) != sc.p) {
    ADD_FAILURE() << "the timeline has " << r.timeline.size() << " rows for " << sc.p << " stages";
    return false;
  }
  for (int s = 0; s < sc.p; ++s) {
    if (r.timeline[s].size() != sc.stages[s].size()) {
      ADD_FAILURE() << "stage " << s << ": " << r.timeline[s].size() << " ops in the timeline, "
                    << sc.stages[s].size() << " in the schedule";
      return false;
    }
    for (size_t k = 0; k < sc.stages[s].size(); ++k) {
      if (r.timeline[s][k].op != sc.stages[s][k]) {
        ADD_FAILURE() << "stage " << s << ", position " << k << ": the timeline has "
                      << ToString(r.timeline[s][k].op) << " where the schedule runs "
                      << ToString(sc.stages[s][k]);
        return false;
      }
    }
  }
  // Where each (virtual stage, microbatch)'s F and backward ended in r's timeline.
  const int p = sc.p, n = p * sc.v;
  std::vector<std::vector<double>> f_end(n, std::vector<double>(sc.m, 0)), b_end = f_end;
  for (int s = 0; s < p; ++s) {
    for (const TimedOp& t : r.timeline[s]) {
      const int k = VirtualStage(s, t.op.chunk, p);
      if (t.op.kind == OpKind::kForward) f_end[k][t.op.mb] = t.end;
      if (test::IsBackward(t.op.kind)) b_end[k][t.op.mb] = t.end;
    }
  }
  for (const auto& [s, pos] : test::ReferenceTimeline(sc, c).order) {
    const TimedOp& t = r.timeline[s][pos];
    const int k = VirtualStage(s, t.op.chunk, p);
    const double free = pos == 0 ? 0 : r.timeline[s][pos - 1].end;
    double start = free;
    std::string why = "its stage is free at " + Num(free);
    auto input = [&](double end, int from_k, const std::string& what) {
      const double hop = from_k % p == s ? 0 : c.comm;
      start = std::max(start, end + hop);
      why += ", its input (" + what + " on stage " + std::to_string(from_k % p) + ") ends at " + Num(end) +
             (hop > 0 ? " and arrives comm = " + Num(hop) + " later" : "");
    };
    if (t.op.kind == OpKind::kForward && k > 0) {
      input(f_end[k - 1][t.op.mb], k - 1, ToString(F(t.op.mb, (k - 1) / p)));
    }
    if (test::IsBackward(t.op.kind) && k + 1 < n) {
      const int chunk = (k + 1) / p;
      input(b_end[k + 1][t.op.mb], k + 1,
            "the backward of microbatch " + std::to_string(t.op.mb) +
                (chunk > 0 ? " of chunk " + std::to_string(chunk) : std::string()));
    }
    if (!Near(t.start, start, kEps)) {
      ADD_FAILURE() << "stage " << s << ", position " << pos << ": " << ToString(t.op) << " starts at "
                    << Num(t.start) << ", but " << why << ": it starts at the later of these";
      return false;
    }
    const double cost = test::CostOf(t.op.kind, c);
    if (!Near(t.end, t.start + cost, kEps)) {
      ADD_FAILURE() << "stage " << s << ", position " << pos << ": " << ToString(t.op) << " runs ["
                    << Num(t.start) << ", " << Num(t.end) << "], not its cost " << Num(cost);
      return false;
    }
  }
  return true;
}

// makespan, busy, idle, first_start and last_end as simulator.h defines them, from r's own timeline.
void ExpectSummaryOfTheTimeline(const Schedule& sc, const Costs& c, const SimResult& r) {
  double makespan = 0;
  for (int s = 0; s < sc.p; ++s) {
    if (!r.timeline[s].empty()) makespan = std::max(makespan, r.timeline[s].back().end);
  }
  EXPECT_NEAR(r.makespan, makespan, kEps) << "the makespan is the latest end of any op";
  ASSERT_EQ(static_cast<int>(r.busy.size()), sc.p);
  ASSERT_EQ(static_cast<int>(r.idle.size()), sc.p);
  ASSERT_EQ(static_cast<int>(r.first_start.size()), sc.p);
  ASSERT_EQ(static_cast<int>(r.last_end.size()), sc.p);
  for (int s = 0; s < sc.p; ++s) {
    double busy = 0;
    for (const Op& op : sc.stages[s]) busy += test::CostOf(op.kind, c);
    EXPECT_NEAR(r.busy[s], busy, kEps) << "stage " << s << ": busy is the sum of its ops' costs";
    EXPECT_NEAR(r.idle[s], r.makespan - r.busy[s], kEps) << "stage " << s << ": idle = makespan - busy";
    EXPECT_NEAR(r.first_start[s], r.timeline[s].front().start, kEps) << "stage " << s << ": first_start";
    EXPECT_NEAR(r.last_end[s], r.timeline[s].back().end, kEps) << "stage " << s << ": last_end";
  }
}

// One stage never waits: the step is its work, m (T_F+T_B+T_W), whatever the order and comm.
TEST(Simulate, SingleStageHasNoBubble) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    const Schedule sc = test::DrawValid(rnd, 1, 1, 1, 8, 1, 1, 0.5);
    const Costs c = DrawCosts(rnd, 1, 12, 1, test::Quarters(rnd, 0, 12));
    SCOPED_TRACE(Drawn(CostsText(c) + "; the schedule " + ScheduleText(sc)));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
    const double work = sc.m * (c.forward + c.backward + c.weight);
    EXPECT_HOLDS(Near(r.makespan, work)) << "makespan " << r.makespan << ": one stage works without a pause";
    EXPECT_NEAR(r.bubble, 0, kEps);
    EXPECT_NEAR(r.bubble_rate, 0, kEps);
    ASSERT_EQ(r.busy.size(), 1u);
    EXPECT_NEAR(r.busy[0], r.makespan, kEps) << "one stage is busy the whole step";
  }
}

// GPipe on drawn p, m and costs (comm = 0): every op of the timeline by the rule, and what the result says
// about it.
TEST(Simulate, GPipeTimelineByHand) {
  CaseRandom rnd;
  for (int draw = 0; draw < 3; ++draw) {
    const int p = rnd.Int(2, 4), m = rnd.Int(1, 4);
    const Costs c = DrawCosts(rnd, 1, 12, 1, 0);
    const Schedule sc = GPipeRows(p, m);
    SCOPED_TRACE(Drawn("GPipe, " + PM(p, m) + ", " + CostsText(c)));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
    if (!ExpectTimelineFollowsTheRule(sc, c, r)) return;
    ExpectSummaryOfTheTimeline(sc, c, r);
    if (HasFailure()) return;
  }
}

// The communication latency delays every hop, forward and backward. GPipe on drawn p, m, T_F, T_B and
// comm > 0, with a free weight gradient (T_W = 0: a W costs nothing, a BW costs T_B).
TEST(Simulate, CommLatencyOnEveryHop) {
  CaseRandom rnd;
  for (int draw = 0; draw < 3; ++draw) {
    const int p = rnd.Int(2, 5), m = rnd.Int(1, 3);
    const Costs c = DrawCosts(rnd, 1, 8, 0, test::Quarters(rnd, 1, 8));
    const Costs free_w{c.forward, c.backward, 0, c.comm};
    const Schedule sc = GPipeRows(p, m);
    SCOPED_TRACE(Drawn("GPipe, " + PM(p, m) + ", " + CostsText(free_w)));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, free_w));
    if (!ExpectTimelineFollowsTheRule(sc, free_w, r)) return;
    ExpectSummaryOfTheTimeline(sc, free_w, r);
    if (HasFailure()) return;
  }
}

// 48 drawn (p, m, T) points, comm = 0: GPipe's bubble rate is its closed form, and every stage holds all m
// microbatches at its peak.
TEST(Simulate, GPipeBubbleRateIsFormula) {
  CaseRandom rnd;
  const std::vector<int> ps = {static_cast<int>(rnd.Int(2, 3)), static_cast<int>(rnd.Int(4, 5)),
                               static_cast<int>(rnd.Int(6, 7)), static_cast<int>(rnd.Int(8, 10))};
  const std::vector<int> ms = {static_cast<int>(rnd.Int(1, 2)), static_cast<int>(rnd.Int(3, 6)),
                               static_cast<int>(rnd.Int(7, 10)), static_cast<int>(rnd.Int(11, 16))};
  std::vector<Costs> costs;
  for (int k = 0; k < 3; ++k) costs.push_back(DrawCosts(rnd, 1, 12, 1, 0));
  for (int p : ps) {
    for (int m : ms) {
      for (const Costs& c : costs) {
        SCOPED_TRACE(Drawn("GPipe(" + std::to_string(p) + ", " + std::to_string(m) + "), " + CostsText(c)));
        ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(p, m));
        ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
        EXPECT_HOLDS(Near(r.bubble_rate, double(p - 1) / (m + p - 1)))
            << "bubble_rate " << r.bubble_rate << " is not GPipe's share of the step idle for this p and m";
        EXPECT_NEAR(r.bubble_rate, GPipeBubbleFraction(p, m), kEps)
            << "the simulator and GPipeBubbleFraction";
        ASSERT_EQ(static_cast<int>(r.peak_activations.size()), p);
        for (int s = 0; s < p; ++s) {
          EXPECT_EQ(r.peak_activations[s], m)
              << "stage " << s << " holds all m microbatches before its first BW";
        }
        if (HasFailure()) return;
      }
    }
  }
}

// The seed's derivation: makespan m(F+B) + (p-1)(F+B) with B the fused backward; the last stage never
// waits once it has started. 36 drawn (p, m, T) points, m < p among them.
TEST(Simulate, OneFOneBMakespanIsSeedFormula) {
  CaseRandom rnd;
  const std::vector<int> ps = {static_cast<int>(rnd.Int(2, 3)), static_cast<int>(rnd.Int(4, 5)),
                               static_cast<int>(rnd.Int(6, 8))};
  const std::vector<int> ms = {static_cast<int>(rnd.Int(1, 3)), static_cast<int>(rnd.Int(4, 6)),
                               static_cast<int>(rnd.Int(7, 10)), static_cast<int>(rnd.Int(11, 16))};
  std::vector<Costs> costs;
  for (int k = 0; k < 3; ++k) costs.push_back(DrawCosts(rnd, 1, 12, 1, 0));
  for (int p : ps) {
    for (int m : ms) {
      for (const Costs& c : costs) {
        SCOPED_TRACE(
            Drawn("OneFOneB(" + std::to_string(p) + ", " + std::to_string(m) + "), " + CostsText(c)));
        ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
        ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
        const double fb = c.forward + c.backward + c.weight;
        EXPECT_HOLDS(Near(r.makespan, m * fb + (p - 1) * fb))
            << "makespan " << r.makespan << " is not 1F1B's";
        EXPECT_NEAR(r.makespan, OneFOneBMakespan(p, m, c), kEps) << "the simulator and OneFOneBMakespan";
        EXPECT_HOLDS(Near(r.bubble, (p - 1) * fb)) << "bubble " << r.bubble << " is not 1F1B's";
        // The last stage: busy from its first op to its last.
        EXPECT_NEAR(r.last_end[p - 1] - r.first_start[p - 1], r.busy[p - 1], kEps)
            << "the last stage waits somewhere inside its span";
        EXPECT_NEAR(r.first_start[p - 1], (p - 1) * c.forward, kEps)
            << "the last stage starts when F0 has come down the pipeline";
        if (HasFailure()) return;
      }
    }
  }
}

TEST(Simulate, OneFOneBPeakActivationsPerStage) {
  CaseRandom rnd;
  const std::vector<int> ps = {static_cast<int>(rnd.Int(2, 3)), static_cast<int>(rnd.Int(4, 5)),
                               static_cast<int>(rnd.Int(6, 8))};
  const std::vector<int> ms = {static_cast<int>(rnd.Int(1, 2)), static_cast<int>(rnd.Int(3, 5)),
                               static_cast<int>(rnd.Int(9, 14))};
  const Costs c = DrawCosts(rnd, 1, 8, 1, 0);
  for (int p : ps) {
    for (int m : ms) {
      SCOPED_TRACE(Drawn("OneFOneB(" + std::to_string(p) + ", " + std::to_string(m) + "), " + CostsText(c)));
      ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
      ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
      ASSERT_EQ(static_cast<int>(r.peak_activations.size()), p);
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(r.peak_activations[s], std::min(p - s, m)) << "stage " << s << " of 1F1B: peak activations";
      }
      if (HasFailure()) return;
    }
  }
}

// Activations count from the start of F to the end of B (or BW): W holds none of them. Random valid split
// schedules whose W run late, so that counting until W would give another peak.
TEST(Simulate, MemoryCountedFromForwardToInputGradient) {
  CaseRandom rnd;
  for (int draw = 0; draw < 3; ++draw) {
    Schedule sc = test::DrawValid(rnd, 1, 3, 2, 5, 1, 1, 0.8);
    for (int again = 0; again < 100 && test::PeakByListWalk(sc) == test::PeakUntilWeight(sc); ++again) {
      sc = test::DrawValid(rnd, 1, 3, 2, 5, 1, 1, 0.8);
    }
    const Costs c = DrawCosts(rnd, 1, 8, 1, test::Quarters(rnd, 0, 4));
    SCOPED_TRACE(Drawn(CostsText(c) + "; the schedule " + ScheduleText(sc)));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
    ASSERT_EQ(static_cast<int>(r.peak_activations.size()), sc.p);
    const std::vector<int> want = test::PeakByListWalk(sc);
    for (int s = 0; s < sc.p; ++s) {
      EXPECT_EQ(r.peak_activations[s], want[s])
          << "stage " << s << ": the most microbatches held at once, each from the start of its F to the end "
          << "of its B or BW";
    }
    if (HasFailure()) return;
  }
}

TEST(Simulate, BusyIdleAndTimelineOrder) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 5), m = rnd.Int(1, 8);
  const Costs c = DrawCosts(rnd, 1, 8, 1, test::Quarters(rnd, 1, 4));
  SCOPED_TRACE(Drawn("OneFOneB(" + std::to_string(p) + ", " + std::to_string(m) + "), " + CostsText(c)));
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
  const double work = m * (c.forward + c.backward + c.weight);
  ASSERT_EQ(static_cast<int>(r.timeline.size()), p);
  ASSERT_EQ(static_cast<int>(r.busy.size()), p);
  ASSERT_EQ(static_cast<int>(r.idle.size()), p);
  ASSERT_EQ(static_cast<int>(r.first_start.size()), p);
  for (int s = 0; s < p; ++s) {
    EXPECT_HOLDS(Near(r.busy[s], work))
        << "stage " << s << ": busy " << r.busy[s] << " is not m (T_F+T_B+T_W)";
    EXPECT_NEAR(r.idle[s], r.makespan - r.busy[s], kEps) << "stage " << s << ": idle = makespan - busy";
    ASSERT_EQ(r.timeline[s].size(), sc.stages[s].size()) << "stage " << s;
    for (size_t k = 0; k < r.timeline[s].size(); ++k) {
      EXPECT_EQ(r.timeline[s][k].op, sc.stages[s][k]) << "stage " << s << ", position " << k;
      if (k > 0) {
        EXPECT_GE(r.timeline[s][k].start, r.timeline[s][k - 1].end - kEps)
            << "stage " << s << ": position " << k << " starts before position " << k - 1 << " ends";
      }
    }
    EXPECT_HOLDS(Near(r.first_start[s], s * (c.forward + c.comm)))
        << "stage " << s << " starts at " << r.first_start[s] << ": F0 comes down one F and one hop a stage";
  }
  EXPECT_NEAR(r.bubble_rate, (r.makespan - work) / r.makespan, kEps) << "bubble_rate of simulator.h";
}

TEST(Simulate, RejectsInvalidInput) {
  CaseRandom rnd;
  // A backward before its forward on a drawn stage.
  Schedule bad = test::DrawValid(rnd, 1, 3, 1, 3, 1, 1, 0.5);
  const int s = rnd.Int(0, bad.p - 1);
  std::vector<Op>& ops = bad.stages[s];
  const auto first_backward =
      std::find_if(ops.begin(), ops.end(), [](const Op& op) { return test::IsBackward(op.kind); });
  const Op moved = *first_backward;
  ops.erase(first_backward);
  ops.insert(ops.begin(), moved);
  EXPECT_EQ(Simulate(bad, Costs{}).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(ToString(moved) + " first on stage " + std::to_string(s) + ": " + ScheduleText(bad));
  const Schedule sc = test::DrawValid(rnd, 1, 3, 1, 3, 1, 1, 0.5);
  const Costs good = DrawCosts(rnd, 1, 8, 1, test::Quarters(rnd, 0, 4));
  std::vector<std::pair<std::string, Costs>> wrong;
  Costs x = good;
  x.forward = -test::Quarters(rnd, 0, 4);
  wrong.push_back({"T_F <= 0", x});
  x = good;
  x.backward = -test::Quarters(rnd, 0, 4);
  wrong.push_back({"T_B <= 0", x});
  x = good;
  x.weight = -test::Quarters(rnd, 1, 4);
  wrong.push_back({"T_W < 0", x});
  x = good;
  x.comm = -test::Quarters(rnd, 1, 4);
  wrong.push_back({"comm < 0", x});
  for (const auto& [what, costs] : wrong) {
    EXPECT_EQ(Simulate(sc, costs).status().code(), absl::StatusCode::kInvalidArgument)
        << what << "\n"
        << Drawn(CostsText(costs) + "; the schedule " + ScheduleText(sc));
  }
}

// Interleaved (v chunks per rank): dependencies follow the virtual stages and comm is paid on every hop
// between two ranks (the activation of the last rank's chunk c goes on to rank 0's chunk c+1), none between
// two chunks of one rank. Drawn p, v, m, costs and comm > 0: every rank runs its forwards chunk by chunk and
// its backwards from the last chunk down; then a random valid interleaved schedule; then one rank with
// several chunks, which never waits.
TEST(Simulate, InterleavedFollowsVirtualStages) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 3), v = rnd.Int(2, 3), m = rnd.Int(1, 3);
  Schedule chunked{"x", p, m, std::vector<std::vector<Op>>(p), v};
  for (int s = 0; s < p; ++s) {
    for (int c = 0; c < v; ++c) {
      for (int i = 0; i < m; ++i) chunked.stages[s].push_back(F(i, c));
    }
    for (int c = v - 1; c >= 0; --c) {
      for (int i = 0; i < m; ++i) chunked.stages[s].push_back(BW(i, c));
    }
  }
  const Schedule drawn = test::DrawValid(rnd, 2, 3, 1, 3, 2, 3, 0.5);
  const Schedule one = test::DrawValid(rnd, 1, 1, 1, 3, 2, 3, 0.5);
  const Costs c = DrawCosts(rnd, 1, 8, 1, test::Quarters(rnd, 1, 6));
  for (const Schedule* sc : std::vector<const Schedule*>{&chunked, &drawn, &one}) {
    SCOPED_TRACE(Drawn(CostsText(c) + "; the schedule " + ScheduleText(*sc)));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(*sc, c));
    if (!ExpectTimelineFollowsTheRule(*sc, c, r)) return;
    ExpectSummaryOfTheTimeline(*sc, c, r);
    // Ideal step v m (F+B+W) per rank.
    const double ideal = sc->v * sc->m * (c.forward + c.backward + c.weight);
    EXPECT_NEAR(r.bubble_rate, (r.makespan - ideal) / r.makespan, kEps) << "bubble_rate of simulator.h";
    const std::vector<int> peak = test::PeakByListWalk(*sc);
    ASSERT_EQ(r.peak_activations.size(), peak.size());
    for (int s = 0; s < sc->p; ++s) {
      EXPECT_EQ(r.peak_activations[s], peak[s])
          << "stage " << s << ": the most (chunk, microbatch) pairs held at once, from F to B or BW";
    }
    if (sc->p == 1) {
      EXPECT_NEAR(r.makespan, ideal, kEps) << "one rank with " << sc->v << " chunks never waits";
      EXPECT_NEAR(r.bubble_rate, 0, kEps);
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace distlab::pipeline
