// Lab 5 (pipeline), stage A: the event simulator.
//
// Each stage is a sequential machine running its list in order, so an op's start time is
//   start = max(end of the previous op on this stage, arrival of each cross-stage dependency)
// and the simulation only has to visit ops in an order where dependencies come first. A worklist does
// that in O(ops): a stage runs until it meets an op whose dependency has not run yet, and is woken when
// that dependency runs.
#include "labs/pipeline/simulator.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

absl::StatusOr<SimResult> Simulate(const Schedule& sc, const Costs& c) {
  RETURN_IF_ERROR(ValidateSchedule(sc));
  if (c.forward <= 0 || c.backward <= 0 || c.weight < 0 || c.comm < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("costs must be T_F > 0, T_B > 0, T_W >= 0, comm >= 0; got T_F = ", c.forward,
                     ", T_B = ", c.backward, ", T_W = ", c.weight, ", comm = ", c.comm));
  }
  const int p = sc.p, m = sc.m, v = sc.v, n_virtual = p * v;
  auto cost = [&](OpKind k) {
    switch (k) {
      case OpKind::kForward:
        return c.forward;
      case OpKind::kBackward:
        return c.backward;
      case OpKind::kWeight:
        return c.weight;
      case OpKind::kFullBackward:
        return c.backward + c.weight;
    }
    return 0.0;
  };
  constexpr double kNotYet = -1;
  // End times of F i and of the input-gradient (B i or BW i) on each virtual stage (chunk c of stage s is
  // virtual stage c p + s; with v = 1 these are the stages).
  std::vector<std::vector<double>> f_end(n_virtual, std::vector<double>(m, kNotYet));
  std::vector<std::vector<double>> b_end(n_virtual, std::vector<double>(m, kNotYet));

  SimResult r;
  r.busy.assign(p, 0);
  r.first_start.assign(p, 0);
  r.last_end.assign(p, 0);
  r.peak_activations.assign(p, 0);
  r.timeline.assign(p, {});
  std::vector<double> free_at(p, 0);
  std::vector<size_t> next(p, 0);
  std::vector<int> in_flight(p, 0);

  std::deque<int> work;
  std::vector<char> queued(p, 1);
  for (int s = 0; s < p; ++s) work.push_back(s);
  auto wake = [&](int s) {
    if (s >= 0 && s < p && !queued[s]) {
      queued[s] = 1;
      work.push_back(s);
    }
  };
  while (!work.empty()) {
    const int s = work.front();
    work.pop_front();
    queued[s] = 0;
    while (next[s] < sc.stages[s].size()) {
      const Op& op = sc.stages[s][next[s]];
      const int k = VirtualStage(s, op.chunk, p);
      double ready = free_at[s];
      if (op.kind == OpKind::kForward && k > 0) {
        if (f_end[k - 1][op.mb] == kNotYet) break;  // woken when virtual stage k-1 runs F i
        // A message only when the neighbour is another rank (with p = 1, v > 1 the chunks share one).
        ready = std::max(ready, f_end[k - 1][op.mb] + ((k - 1) % p != s ? c.comm : 0));
      }
      if ((op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward) && k + 1 < n_virtual) {
        if (b_end[k + 1][op.mb] == kNotYet) break;  // woken when virtual stage k+1 runs B i
        ready = std::max(ready, b_end[k + 1][op.mb] + ((k + 1) % p != s ? c.comm : 0));
      }
      // (Same-stage dependencies hold by list order: the validator checked it.)
      const double end = ready + cost(op.kind);
      if (next[s] == 0) r.first_start[s] = ready;
      r.timeline[s].push_back({op, ready, end});
      r.busy[s] += cost(op.kind);
      free_at[s] = end;
      // Memory: microbatch i's activations exist from the start of F i to the end of its B / BW, so the
      // count goes up before F runs and the peak is taken right then (per chunk: units of M_B / v).
      if (op.kind == OpKind::kForward) {
        f_end[k][op.mb] = end;
        r.peak_activations[s] = std::max(r.peak_activations[s], ++in_flight[s]);
        if (k + 1 < n_virtual) wake((k + 1) % p);
      } else if (op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward) {
        b_end[k][op.mb] = end;
        --in_flight[s];
        if (k > 0) wake((k - 1) % p);
      }
      ++next[s];
    }
  }
  // The validator ruled out deadlock, so every list ran to its end.
  r.idle.assign(p, 0);
  for (int s = 0; s < p; ++s) {
    r.last_end[s] = free_at[s];
    r.makespan = std::max(r.makespan, free_at[s]);
  }
  const double work_per_stage = v * m * (c.forward + c.backward + c.weight);  // every chunk of every mb
  for (int s = 0; s < p; ++s) {
    r.idle[s] = r.makespan - r.busy[s];
    r.bubble = std::max(r.bubble, r.last_end[s] - r.first_start[s] - r.busy[s]);
  }
  r.bubble_rate = (r.makespan - work_per_stage) / r.makespan;
  return r;
}

}  // namespace distlab::pipeline
