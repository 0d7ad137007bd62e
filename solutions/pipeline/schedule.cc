// Lab 5 (pipeline), stage A: schedule helpers, the validator, GPipe and 1F1B, and their closed forms.
#include "labs/pipeline/schedule.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace distlab::pipeline {

namespace {

// Position of each op kind of each (chunk, microbatch) on one stage, at index chunk * m + mb; -1 = absent.
struct Positions {
  std::vector<int> f, b, w, bw;
  explicit Positions(int n) : f(n, -1), b(n, -1), w(n, -1), bw(n, -1) {}
  std::vector<int>& of(OpKind kind) {
    switch (kind) {
      case OpKind::kForward:
        return f;
      case OpKind::kBackward:
        return b;
      case OpKind::kWeight:
        return w;
      case OpKind::kFullBackward:
        return bw;
    }
    return f;
  }
};

// "microbatch 3" or, on chunk c > 0, "microbatch 3 of chunk 1".
std::string Micro(int mb, int chunk) {
  return chunk == 0 ? absl::StrCat("microbatch ", mb) : absl::StrCat("microbatch ", mb, " of chunk ", chunk);
}

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid schedule: ", what));
}

}  // namespace

absl::Status ValidateSchedule(const Schedule& sc) {
  const int p = sc.p, m = sc.m, v = sc.v;
  // 1. Shape.
  if (p < 1) return Invalid(absl::StrCat("p = ", p, " stages; need p >= 1"));
  if (m < 1) return Invalid(absl::StrCat("m = ", m, " microbatches; need m >= 1"));
  if (v < 1) return Invalid(absl::StrCat("v = ", v, " chunks per stage; need v >= 1"));
  if (static_cast<int>(sc.stages.size()) != p) {
    return Invalid(absl::StrCat("p = ", p, " but the schedule lists ", sc.stages.size(), " stages"));
  }
  // 2. Every op once: F i exactly once, and BW i or (B i and W i) exactly once -- per chunk.
  std::vector<Positions> pos(p, Positions(v * m));
  for (int s = 0; s < p; ++s) {
    for (int k = 0; k < static_cast<int>(sc.stages[s].size()); ++k) {
      const Op& op = sc.stages[s][k];
      if (op.mb < 0 || op.mb >= m) {
        return Invalid(absl::StrCat("stage ", s, " position ", k, ": ", ToString(op), " names microbatch ",
                                    op.mb, ", outside [0, ", m, ")"));
      }
      if (op.chunk < 0 || op.chunk >= v) {
        return Invalid(absl::StrCat("stage ", s, " position ", k, ": ", ToString(op), " names chunk ",
                                    op.chunk, ", outside [0, ", v, ") (v = ", v, " chunks per stage)"));
      }
      int& slot = pos[s].of(op.kind)[op.chunk * m + op.mb];
      if (slot >= 0) {
        return Invalid(absl::StrCat("stage ", s, ": ", ToString(op), " appears twice (positions ", slot,
                                    " and ", k, "); every op runs exactly once"));
      }
      slot = k;
    }
    for (int c = 0; c < v; ++c) {
      for (int i = 0; i < m; ++i) {
        const Positions& ps = pos[s];
        const int x = c * m + i;
        if (ps.f[x] < 0) return Invalid(absl::StrCat("stage ", s, ": ", ToString(F(i, c)), " is missing"));
        const bool fused = ps.bw[x] >= 0, split = ps.b[x] >= 0 || ps.w[x] >= 0;
        if (fused && split) {
          return Invalid(absl::StrCat("stage ", s, ": ", Micro(i, c),
                                      " has both a fused BW and a split B/W; use one or the other"));
        }
        if (!fused && ps.b[x] < 0) {
          return Invalid(absl::StrCat("stage ", s, ": ", Micro(i, c), " has no backward (needs ",
                                      ToString(BW(i, c)), ", or ", ToString(B(i, c)), " and ",
                                      ToString(W(i, c)), ")"));
        }
        if (!fused && ps.w[x] < 0) {
          return Invalid(absl::StrCat("stage ", s, ": ", ToString(B(i, c)), " has no ", ToString(W(i, c)),
                                      "; the weight gradient must be computed"));
        }
      }
    }
  }
  // 3. Order within a stage: backward after its forward, W after its B.
  for (int s = 0; s < p; ++s) {
    for (int k = 0; k < static_cast<int>(sc.stages[s].size()); ++k) {
      const Op& op = sc.stages[s][k];
      const Positions& ps = pos[s];
      const int x = op.chunk * m + op.mb;
      if ((op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward) && ps.f[x] > k) {
        return Invalid(absl::StrCat("stage ", s, ": ", ToString(op), " at position ", k, " comes before ",
                                    ToString(F(op.mb, op.chunk)), " (position ", ps.f[x],
                                    "); a backward needs its forward's activations"));
      }
      if (op.kind == OpKind::kWeight && ps.b[x] > k) {
        return Invalid(absl::StrCat("stage ", s, ": ", ToString(op), " at position ", k, " comes before ",
                                    ToString(B(op.mb, op.chunk)), " (position ", ps.b[x],
                                    "); W needs the output gradient B receives"));
      }
    }
  }
  // 4. Across stages: run every stage's list in order, each op once its neighbour's op has run. The
  //    neighbours are virtual stages: chunk c of stage s is virtual stage k = c p + s, fed by k-1 and
  //    receiving its gradient from k+1 (with v = 1, simply s-1 and s+1). If no stage can move, the stages
  //    wait on each other: name where each is stuck.
  const int n_virtual = p * v;
  std::vector<int> next(p, 0);
  std::vector<std::vector<char>> f_done(n_virtual, std::vector<char>(m, 0));
  std::vector<std::vector<char>> b_done(n_virtual, std::vector<char>(m, 0));
  // What `op` of stage s waits for, or "" when it can run now.
  auto waits_for = [&](int s, const Op& op) -> std::string {
    const int k = VirtualStage(s, op.chunk, p);
    if (op.kind == OpKind::kForward && k > 0 && !f_done[k - 1][op.mb]) {
      return absl::StrCat(ToString(F(op.mb, (k - 1) / p)), " on stage ", (k - 1) % p);
    }
    if ((op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward) && k + 1 < n_virtual &&
        !b_done[k + 1][op.mb]) {
      return absl::StrCat("the backward of ", Micro(op.mb, (k + 1) / p), " on stage ", (k + 1) % p);
    }
    return "";
  };
  size_t remaining = 0;
  for (const auto& ops : sc.stages) remaining += ops.size();
  while (remaining > 0) {
    bool moved = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < static_cast<int>(sc.stages[s].size())) {
        const Op& op = sc.stages[s][next[s]];
        if (!waits_for(s, op).empty()) break;
        const int k = VirtualStage(s, op.chunk, p);
        if (op.kind == OpKind::kForward) f_done[k][op.mb] = 1;
        if (op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward) b_done[k][op.mb] = 1;
        ++next[s];
        --remaining;
        moved = true;
      }
    }
    if (!moved) {
      std::string msg = "deadlock:";
      for (int s = 0; s < p; ++s) {
        if (next[s] >= static_cast<int>(sc.stages[s].size())) continue;
        const Op& op = sc.stages[s][next[s]];
        absl::StrAppend(&msg, " stage ", s, " waits at position ", next[s], " (", ToString(op), ") for ",
                        waits_for(s, op), ";");
      }
      return Invalid(msg + " reorder so that each dependency runs first");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Schedule> GPipe(int p, int m) {
  if (p < 1 || m < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPipe needs p >= 1 and m >= 1, got p = ", p, ", m = ", m));
  }
  Schedule sc{"GPipe", p, m, std::vector<std::vector<Op>>(p)};
  for (int s = 0; s < p; ++s) {
    for (int i = 0; i < m; ++i) sc.stages[s].push_back(F(i));
    for (int i = 0; i < m; ++i) sc.stages[s].push_back(BW(i));
  }
  return sc;
}

absl::StatusOr<Schedule> OneFOneB(int p, int m) {
  if (p < 1 || m < 1) {
    return absl::InvalidArgumentError(absl::StrCat("1F1B needs p >= 1 and m >= 1, got p = ", p, ", m = ", m));
  }
  Schedule sc{"1F1B", p, m, std::vector<std::vector<Op>>(p)};
  for (int s = 0; s < p; ++s) {
    // Warm-up: enough forwards that the first backward reaches this stage just as it finishes them. The
    // last stage needs none: its backward depends only on its own forward.
    const int warmup = std::min(p - s - 1, m);
    std::vector<Op>& ops = sc.stages[s];
    for (int i = 0; i < warmup; ++i) ops.push_back(F(i));
    // Steady state: one forward, then the backward of the oldest microbatch in flight (p-s in flight at
    // most); cool-down: the backwards left once forwards run out.
    for (int i = 0; i < m; ++i) {
      if (i + warmup < m) ops.push_back(F(i + warmup));
      ops.push_back(BW(i));
    }
  }
  return sc;
}

double GPipeBubbleFraction(int p, int m) {
  // Each stage works m (F+B) of a makespan (m + p - 1)(F+B): the fill and the drain each take p-1 slots.
  return static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
}

double OneFOneBMakespan(int p, int m, const Costs& c) {
  const double per_mb = c.forward + c.backward + c.weight;
  return m * per_mb + (p - 1) * per_mb;
}

}  // namespace distlab::pipeline
