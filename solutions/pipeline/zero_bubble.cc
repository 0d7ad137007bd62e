// Lab 5 (pipeline), stage B: zero-bubble schedules.
//
// Splitting the backward into B (dL/dx, which the previous stage waits for) and W (dL/dW, which only the
// optimizer waits for) lets W move into what would otherwise be bubbles. Both handcrafted schedules of the
// Zero Bubble paper come out of one rule -- a greedy list schedule that prefers B, then F (within a limit
// on microbatches in flight), then W -- run at T_F = T_B = T_W:
//   limit p - s       -> ZB-H1 (1F1B's memory; W fills the cool-down)
//   limit 2(p-s) - 1  -> ZB-H2 (extra warm-up forwards; the busy region becomes a parallelogram)
// Run with the real costs and one limit for all stages, the same rule is the memory-limited automatic
// scheduler in the spirit of ZB-1p / ZB-2p.
//
// The other way to shrink the bubble: interleaved 1F1B cuts the model into v chunks per rank, so each op
// costs 1/v of a stage's op and the fill and drain -- p-1 op slots each -- shrink by v.
#include "labs/pipeline/zero_bubble.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

absl::StatusOr<Schedule> GreedySplitSchedule(int p, int m, const Costs& c,
                                             const std::vector<int>& max_in_flight) {
  if (p < 1 || m < 1) {
    return absl::InvalidArgumentError(absl::StrCat("need p >= 1 and m >= 1, got p = ", p, ", m = ", m));
  }
  if (static_cast<int>(max_in_flight.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("max_in_flight has ", max_in_flight.size(),
                                                   " entries; need one per stage (p = ", p, ")"));
  }
  for (int s = 0; s < p; ++s) {
    if (max_in_flight[s] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("max_in_flight[", s, "] = ", max_in_flight[s],
                                                     "; a stage must hold at least one microbatch"));
    }
  }
  if (c.forward <= 0 || c.backward <= 0 || c.weight <= 0 || c.comm < 0) {
    return absl::InvalidArgumentError("greedy scheduling needs T_F, T_B, T_W > 0 and comm >= 0");
  }
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> f_end(p, std::vector<double>(m, kNotYet));
  std::vector<std::vector<double>> b_end(p, std::vector<double>(m, kNotYet));
  std::vector<double> free_at(p, 0);
  std::vector<int> nf(p, 0), nb(p, 0), nw(p, 0);  // next F, B, W microbatch of each stage
  Schedule sc{"greedy", p, m, std::vector<std::vector<Op>>(p)};

  // Each stage's pick depends only on its own state and on its neighbours' end times, so after a commit
  // on stage s only the picks of s-1, s and s+1 change: cache them (O(p) per op for the scan, not more).
  struct Pick {
    bool valid = false;
    double start = 0;
    Op op;
  };
  auto pick_of = [&](int s) {
    Pick best;  // what can start the moment the stage is free wins by priority B > F > W ...
    Pick wait;  // ... otherwise the candidate that can start earliest
    auto offer = [&](double arrive, Op op) {
      const double start = std::max(free_at[s], arrive);
      if (start <= free_at[s]) {
        if (!best.valid) best = {true, start, op};
      } else if (!wait.valid || start < wait.start) {
        wait = {true, start, op};
      }
    };
    if (nb[s] < nf[s]) {  // B of the oldest microbatch past F
      const int i = nb[s];
      const double arrive = s == p - 1 ? f_end[s][i] : b_end[s + 1][i];
      if (arrive != kNotYet) offer(s == p - 1 ? arrive : arrive + c.comm, B(i));
    }
    if (nf[s] < m && nf[s] - nb[s] < max_in_flight[s]) {  // F within the memory limit
      const int i = nf[s];
      const double arrive = s == 0 ? 0 : f_end[s - 1][i];
      if (arrive != kNotYet) offer(s == 0 ? 0 : arrive + c.comm, F(i));
    }
    if (nw[s] < nb[s]) offer(free_at[s], W(nw[s]));  // W fills what is left
    return best.valid ? best : wait;
  };
  std::vector<Pick> picks(p);
  for (int s = 0; s < p; ++s) picks[s] = pick_of(s);

  for (long left = 3L * p * m; left > 0; --left) {
    int best_stage = -1;
    double best_start = std::numeric_limits<double>::infinity();
    Op best_op;
    for (int s = 0; s < p; ++s) {
      if (picks[s].valid && picks[s].start < best_start) {
        best_start = picks[s].start;
        best_stage = s;
        best_op = picks[s].op;
      }
    }
    if (best_stage < 0) return absl::InternalError("greedy schedule: no stage can move");
    const int s = best_stage, i = best_op.mb;
    double end = best_start;
    switch (best_op.kind) {
      case OpKind::kForward:
        end += c.forward;
        f_end[s][i] = end;
        ++nf[s];
        break;
      case OpKind::kBackward:
        end += c.backward;
        b_end[s][i] = end;
        ++nb[s];
        break;
      default:
        end += c.weight;
        ++nw[s];
        break;
    }
    free_at[s] = end;
    sc.stages[s].push_back(best_op);
    for (int t = std::max(0, s - 1); t <= std::min(p - 1, s + 1); ++t) picks[t] = pick_of(t);
  }
  return sc;
}

absl::StatusOr<Schedule> ZeroBubbleH1(int p, int m) {
  std::vector<int> limit(p > 0 ? p : 0);
  for (int s = 0; s < p; ++s) limit[s] = p - s;  // the same in-flight count as 1F1B
  auto sc = GreedySplitSchedule(p, m, Costs{1, 1, 1, 0}, limit);
  if (sc.ok()) sc->name = "ZB-H1";
  return sc;
}

absl::StatusOr<Schedule> ZeroBubbleH2(int p, int m) {
  std::vector<int> limit(p > 0 ? p : 0);
  // p - s - 1 extra warm-up forwards: enough work that stage s is never waiting for the first B.
  for (int s = 0; s < p; ++s) limit[s] = 2 * (p - s) - 1;
  auto sc = GreedySplitSchedule(p, m, Costs{1, 1, 1, 0}, limit);
  if (sc.ok()) sc->name = "ZB-H2";
  return sc;
}

Table2Row ZeroBubbleTable2(Table2Schedule which, int p, const Costs& c) {
  const double f = c.forward, b = c.backward, w = c.weight;
  switch (which) {
    case Table2Schedule::kOneFOneB:
      return {(p - 1) * (f + b + w), p};
    case Table2Schedule::kZeroBubbleH1:
      return {(p - 1) * (f + b - w), p};
    case Table2Schedule::kZeroBubbleH2:
      return {(p - 1) * (f + b - 2 * w), 2 * p - 1};
  }
  return {};
}

absl::StatusOr<Schedule> ZeroBubbleGreedy(int p, int m, const Costs& costs, int limit_microbatches) {
  auto sc = GreedySplitSchedule(p, m, costs, std::vector<int>(p > 0 ? p : 0, limit_microbatches));
  if (sc.ok()) sc->name = absl::StrCat("ZB-greedy(", limit_microbatches, ")");
  return sc;
}

absl::StatusOr<Schedule> InterleavedOneFOneB(int p, int m, int v, int group) {
  if (p < 1 || m < 1 || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interleaved 1F1B needs p >= 1, m >= 1 and v >= 1, got p = ", p, ", m = ", m, ", v = ", v));
  }
  if (v == 1) {  // one chunk per rank: plain 1F1B, for any m (Megatron-LM runs its non-interleaved schedule)
    ASSIGN_OR_RETURN(Schedule sc, OneFOneB(p, m));
    sc.name = "interleaved 1F1B (v=1)";
    return sc;
  }
  const int n = group == 0 ? p : group;  // N: microbatches per group
  if (n < p || n > m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interleaved 1F1B (v = ", v, ") needs p <= N <= m for its ", "group of N microbatches; got N = ", n,
        group == 0 ? " (the default, p)" : "", ", p = ", p, ", m = ", m));
  }
  if (m % n != 0 && m % n < p) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleaved 1F1B (v = ", v, ") runs microbatches in groups of N = ", n,
                     group == 0 ? " (the default, p)" : "", "; m = ", m, " leaves a last group of ", m % n,
                     ", fewer than p = ", p, ": make m a multiple of N, or choose N with m mod N >= p"));
  }
  Schedule sc{absl::StrCat("interleaved 1F1B (v=", v, ")"), p, m, std::vector<std::vector<Op>>(p), v};
  // The (microbatch, chunk) of a rank's k-th forward: groups of N microbatches (the last group holds what
  // is left) pass chunk 0, then chunk 1, ... (Megatron-LM's schedule table). The k-th backward is the same
  // microbatch on chunk v-1-c: the gradient enters at the model's last chunk.
  std::vector<std::pair<int, int>> table;  // (microbatch, chunk)
  for (int first = 0; first < m; first += n) {
    const int last = std::min(first + n, m);
    for (int c = 0; c < v; ++c) {
      for (int i = first; i < last; ++i) table.push_back({i, c});
    }
  }
  const int total = v * m;  // ops of each kind on one rank: every microbatch through every chunk
  for (int s = 0; s < p; ++s) {
    // Warm-up: the (v-1) N forwards of the first group on the earlier chunks, plus 2 (p-s-1) so the first
    // backward of the last chunk has come back by the time they are done (Megatron-LM's count).
    const int warmup = std::min(total, 2 * (p - s - 1) + (v - 1) * n);
    std::vector<Op>& ops = sc.stages[s];
    auto forward = [&](int k) { return F(table[k].first, table[k].second); };
    auto backward = [&](int k) { return BW(table[k].first, v - 1 - table[k].second); };
    for (int k = 0; k < warmup; ++k) ops.push_back(forward(k));
    for (int k = 0; k < total; ++k) {
      if (k + warmup < total) ops.push_back(forward(k + warmup));
      ops.push_back(backward(k));
    }
  }
  return sc;
}

double InterleavedBubbleFraction(int p, int m, int v) {
  // Bubble (p-1)(T_F+T_B+T_W)/v over the ideal step m (T_F+T_B+T_W).
  return static_cast<double>(p - 1) / (static_cast<double>(v) * m);
}

}  // namespace distlab::pipeline
