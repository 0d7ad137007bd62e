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
#include <vector>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<Schedule> InterleavedOneFOneB(int p, int m, int v) {
  if (p < 1 || m < 1 || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interleaved 1F1B needs p >= 1, m >= 1 and v >= 1, got p = ", p, ", m = ", m, ", v = ", v));
  }
  if (m % p != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleaved 1F1B needs m to be a multiple of p (microbatches go through the chunks in "
                     "groups of p); got m = ",
                     m, ", p = ", p));
  }
  Schedule sc{absl::StrCat("interleaved 1F1B (v=", v, ")"), p, m, std::vector<std::vector<Op>>(p), v};
  const int total = v * m;  // ops of each kind on one rank: every microbatch through every chunk
  // The k-th forward (backward) of a rank: groups of p microbatches pass chunk 0, then chunk 1, ...; the
  // backwards walk the chunks in reverse, since the gradient enters at the model's last chunk.
  auto forward = [&](int k) { return F((k / (p * v)) * p + k % p, (k % (p * v)) / p); };
  auto backward = [&](int k) { return BW((k / (p * v)) * p + k % p, v - 1 - (k % (p * v)) / p); };
  for (int s = 0; s < p; ++s) {
    // Warm-up: the (v-1) p forwards of the first group on the earlier chunks, plus 2 (p-s-1) so the first
    // backward of the last chunk has come back by the time they are done (Megatron-LM's count).
    const int warmup = std::min(total, 2 * (p - s - 1) + (v - 1) * p);
    std::vector<Op>& ops = sc.stages[s];
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
