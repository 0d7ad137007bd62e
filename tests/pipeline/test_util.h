// Helpers of Lab 5's hidden tests: how a drawn case names its input, random valid schedules, and
// brute-force references written from the headers' definitions (a timeline, where a deadlocked schedule
// stops, the activations a stage holds).
//
// A drawn case takes its inputs from a distlab::testing::CaseRandom (the grading seed and the case's name),
// so each grading checks other inputs. Its failures name the property that failed and the input that broke
// it, never an expected value to paste: SCOPED_TRACE(Drawn("...")) adds the input and the seed note to every
// failure inside the scope.
#ifndef DISTLAB_TESTS_PIPELINE_TEST_UTIL_H_
#define DISTLAB_TESTS_PIPELINE_TEST_UTIL_H_

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "tools/testing/test_support.h"

// EXPECT_HOLDS(condition) << "what failed": a non-fatal failure that prints only the streamed message, not
// the condition's text, so that a drawn case's failure names the property and the input, never the formula
// of the value it expected.
#define EXPECT_HOLDS(condition) \
  switch (0)                    \
  case 0:                       \
  default:                      \
    if (condition) {            \
    } else                      \
      ADD_FAILURE()

namespace distlab::pipeline::test {

using ::distlab::testing::CaseRandom;

// The trace of a drawn input: "drawn input: <input>; grading seed S; to draw the same inputs: ...".
inline std::string Drawn(const std::string& input) {
  return "drawn input: " + input + "; " + ::distlab::testing::SeedNote();
}

// A number as a person writes it: 1, 1.5, 0.25, 1e-12.
inline std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

inline std::string CostsText(const Costs& c) {
  return "T_F = " + Num(c.forward) + ", T_B = " + Num(c.backward) + ", T_W = " + Num(c.weight) +
         ", comm = " + Num(c.comm);
}

// The ops of stage s, "F0 F1 BW0 ...".
inline std::string Row(const Schedule& sc, int s) {
  std::string out;
  for (const Op& op : sc.stages[s]) out += (out.empty() ? "" : " ") + ToString(op);
  return out;
}

// Every stage of a (small, drawn) schedule on one line: "p = 2, m = 2, v = 1: stage 0: F0 ... | stage 1:
// ...".
inline std::string ScheduleText(const Schedule& sc) {
  std::string out =
      "p = " + std::to_string(sc.p) + ", m = " + std::to_string(sc.m) + ", v = " + std::to_string(sc.v) + ":";
  for (size_t s = 0; s < sc.stages.size(); ++s) {
    out += (s == 0 ? " stage " : " | stage ") + std::to_string(s) + ": " + Row(sc, static_cast<int>(s));
  }
  return out;
}

// A cost in quarters, lo/4 .. hi/4: multiples of 0.25 keep every sum of costs exact, so ties are exact.
inline double Quarters(CaseRandom& rnd, int lo, int hi) {
  return 0.25 * static_cast<double>(rnd.Int(lo, hi));
}

inline bool IsBackward(OpKind k) { return k == OpKind::kBackward || k == OpKind::kFullBackward; }

// A schedule drawn at random among the valid ones: a random run of the dependency graph of schedule.h (F i on
// virtual stage k after F i on k-1; B / BW i on k after the backward of i on k+1 and after F i on k; W i
// after B i), each op appended to its rank's list when it runs. Each (rank, chunk, microbatch) runs a split
// B and W with probability `split`, else a fused BW.
inline Schedule RandomValidSchedule(CaseRandom& rnd, int p, int m, int v, double split) {
  Schedule sc{"drawn", p, m, std::vector<std::vector<Op>>(p), v};
  const int n = p * v;  // virtual stages
  auto at = [m](int k, int i) { return static_cast<size_t>(k) * m + i; };
  std::vector<char> is_split(static_cast<size_t>(n) * m), f(is_split.size()), b(is_split.size()),
      w(is_split.size());
  for (auto& x : is_split) x = rnd.Chance(split);
  for (;;) {
    std::vector<std::pair<int, Op>> ready;  // (virtual stage, op)
    for (int k = 0; k < n; ++k) {
      const int c = k / p;
      for (int i = 0; i < m; ++i) {
        const size_t x = at(k, i);
        if (!f[x]) {
          if (k == 0 || f[at(k - 1, i)]) ready.push_back({k, F(i, c)});
        } else if (!b[x]) {
          if (k == n - 1 || b[at(k + 1, i)]) ready.push_back({k, is_split[x] ? B(i, c) : BW(i, c)});
        } else if (is_split[x] && !w[x]) {
          ready.push_back({k, W(i, c)});
        }
      }
    }
    if (ready.empty()) break;
    const auto [k, op] = rnd.Pick(ready);
    const size_t x = at(k, op.mb);
    if (op.kind == OpKind::kForward) f[x] = 1;
    if (IsBackward(op.kind)) b[x] = 1;
    if (op.kind == OpKind::kWeight) w[x] = 1;
    sc.stages[k % p].push_back(op);
  }
  return sc;
}

// A random valid schedule of p in [p_lo, p_hi] stages, m in [m_lo, m_hi] microbatches and v in [v_lo, v_hi]
// chunks per rank, drawn in that order.
inline Schedule DrawValid(CaseRandom& rnd, int p_lo, int p_hi, int m_lo, int m_hi, int v_lo, int v_hi,
                          double split) {
  const int p = static_cast<int>(rnd.Int(p_lo, p_hi));
  const int m = static_cast<int>(rnd.Int(m_lo, m_hi));
  const int v = static_cast<int>(rnd.Int(v_lo, v_hi));
  return RandomValidSchedule(rnd, p, m, v, split);
}

// Where each stage stops when every list runs in order, an op only once what it needs from another
// (virtual) stage has run: stuck[s] = the position of stage s's next op (its list's size when it finished).
// A schedule whose lists are valid one by one is deadlocked exactly when some stage stops early.
inline std::vector<int> RunUntilStuck(const Schedule& sc) {
  const int p = sc.p, m = sc.m, n = p * sc.v;
  std::vector<std::vector<char>> f(n, std::vector<char>(m, 0)), b(n, std::vector<char>(m, 0));
  std::vector<int> next(p, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < static_cast<int>(sc.stages[s].size())) {
        const Op& op = sc.stages[s][next[s]];
        const int k = VirtualStage(s, op.chunk, p);
        if (op.kind == OpKind::kForward && k > 0 && !f[k - 1][op.mb]) break;
        if (IsBackward(op.kind) && k + 1 < n && !b[k + 1][op.mb]) break;
        if (op.kind == OpKind::kForward) f[k][op.mb] = 1;
        if (IsBackward(op.kind)) b[k][op.mb] = 1;
        ++next[s];
        moved = true;
      }
    }
  }
  return next;
}

// The timeline of simulator.h for a valid schedule, by brute force: sweep the stages again and again, placing
// each stage's next op once the op it waits for on another virtual stage is placed, at the later of the end
// of the stage's previous op and that op's end (+ comm when it ran on another rank).
struct Placed {
  std::vector<std::vector<TimedOp>> timeline;
  std::vector<std::pair<int, int>> order;  // (stage, position) in the order they were placed
};
inline double CostOf(OpKind kind, const Costs& c) {
  switch (kind) {
    case OpKind::kForward:
      return c.forward;
    case OpKind::kBackward:
      return c.backward;
    case OpKind::kWeight:
      return c.weight;
    case OpKind::kFullBackward:
      return c.backward + c.weight;
  }
  return 0;
}
inline Placed ReferenceTimeline(const Schedule& sc, const Costs& c) {
  const int p = sc.p, m = sc.m, n = p * sc.v;
  constexpr double kNone = -1;
  std::vector<std::vector<double>> f_end(n, std::vector<double>(m, kNone)), b_end = f_end;
  Placed out;
  out.timeline.assign(p, {});
  std::vector<double> free_at(p, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      while (out.timeline[s].size() < sc.stages[s].size()) {
        const Op& op = sc.stages[s][out.timeline[s].size()];
        const int k = VirtualStage(s, op.chunk, p);
        double start = free_at[s];
        if (op.kind == OpKind::kForward && k > 0) {
          if (f_end[k - 1][op.mb] == kNone) break;
          start = std::max(start, f_end[k - 1][op.mb] + ((k - 1) % p == s ? 0 : c.comm));
        }
        if (IsBackward(op.kind) && k + 1 < n) {
          if (b_end[k + 1][op.mb] == kNone) break;
          start = std::max(start, b_end[k + 1][op.mb] + ((k + 1) % p == s ? 0 : c.comm));
        }
        const double end = start + CostOf(op.kind, c);
        if (op.kind == OpKind::kForward) f_end[k][op.mb] = end;
        if (IsBackward(op.kind)) b_end[k][op.mb] = end;
        out.order.push_back({s, static_cast<int>(out.timeline[s].size())});
        out.timeline[s].push_back({op, start, end});
        free_at[s] = end;
        moved = true;
      }
    }
  }
  return out;
}

// The activations each stage holds at most, walking its list: a (chunk, microbatch) counts from its F to
// its B or BW (on one stage the ops run one after the other, so the list order is the time order).
inline std::vector<int> PeakByListWalk(const Schedule& sc) {
  std::vector<int> peak(sc.p, 0);
  for (int s = 0; s < sc.p; ++s) {
    int now = 0;
    for (const Op& op : sc.stages[s]) {
      if (op.kind == OpKind::kForward) peak[s] = std::max(peak[s], ++now);
      if (IsBackward(op.kind)) --now;
    }
  }
  return peak;
}

// The same walk, but a microbatch held until its W (or BW): what a count that forgets that W keeps no
// activations would say.
inline std::vector<int> PeakUntilWeight(const Schedule& sc) {
  std::vector<int> peak(sc.p, 0);
  for (int s = 0; s < sc.p; ++s) {
    int now = 0;
    for (const Op& op : sc.stages[s]) {
      if (op.kind == OpKind::kForward) peak[s] = std::max(peak[s], ++now);
      if (op.kind == OpKind::kWeight || op.kind == OpKind::kFullBackward) --now;
    }
  }
  return peak;
}

// |a - b| <= eps (1 + |b|).
inline bool Near(double a, double b, double eps = 1e-9) {
  const double scale = 1 + (b < 0 ? -b : b);
  const double d = a - b;
  return (d < 0 ? -d : d) <= eps * scale;
}

}  // namespace distlab::pipeline::test

#endif  // DISTLAB_TESTS_PIPELINE_TEST_UTIL_H_
