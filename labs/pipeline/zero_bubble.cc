// Lab 5 (pipeline), stage B: zero-bubble schedules. Read notes/05-pipeline.md section 4 first.
#include "labs/pipeline/zero_bubble.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

absl::StatusOr<Schedule> GreedySplitSchedule(int p, int m, const Costs& costs,
                                             const std::vector<int>& max_in_flight) {
  // TODO(pipeline stage B): the greedy list schedule of schedule.h, simulated with `costs` as you build it.
  //  1. Errors (InvalidArgument): p < 1, m < 1, max_in_flight.size() != p, any limit < 1, T_F/T_B/T_W <= 0.
  //  2. Per stage keep: time it is free; next F, next B, next W microbatch; end times of its F and B ops.
  //  3. Candidates of stage s: B(nb) if nb < nf and its gradient has arrived (the last stage: its own F);
  //     F(nf) if nf < m, nf - nb < max_in_flight[s] and its activation has arrived (stage 0: at time 0);
  //     W(nw) if nw < nb. Arrivals from a neighbour add costs.comm.
  //  4. A stage picks, among candidates that can start when it is free (an input arriving exactly then
  //     counts), B over F over W; if none can, the candidate that can start earliest (B before F on a tie).
  //     Commit the pick of the stage whose pick starts earliest (ties: lower stage), and repeat until all
  //     3 p m ops are placed. zero_bubble.h lists the tie-breaks; the public tests draw two schedules.
  (void)p, (void)m, (void)costs, (void)max_in_flight;
  return Unimplemented("pipeline", "B", "GreedySplitSchedule");
}

absl::StatusOr<Schedule> ZeroBubbleH1(int p, int m) {
  // TODO(pipeline stage B): the greedy schedule at T_F = T_B = T_W = 1, comm 0, stage s limited to p-s
  // microbatches in flight (1F1B's memory). name = "ZB-H1".
  (void)p, (void)m;
  return Unimplemented("pipeline", "B", "ZeroBubbleH1");
}

absl::StatusOr<Schedule> ZeroBubbleH2(int p, int m) {
  // TODO(pipeline stage B): as ZB-H1 but stage s may hold 2(p-s)-1 microbatches: the extra warm-up
  // forwards that fill the wait for the first B. name = "ZB-H2".
  (void)p, (void)m;
  return Unimplemented("pipeline", "B", "ZeroBubbleH2");
}

Table2Row ZeroBubbleTable2(Table2Schedule which, int p, const Costs& costs) {
  // TODO(pipeline stage B): the Zero Bubble paper's Table 2 -- bubble and peak activations (in M_B) of
  // 1F1B, ZB-H1 and ZB-H2 as functions of p, T_F, T_B, T_W.
  (void)which, (void)p, (void)costs;
  throw NotImplementedError("pipeline", "B", "ZeroBubbleTable2");
}

absl::StatusOr<Schedule> ZeroBubbleGreedy(int p, int m, const Costs& costs, int limit_microbatches) {
  // TODO(pipeline stage B, stretch): GreedySplitSchedule with the real costs and the same limit on every
  // stage. name = "ZB-greedy(<limit>)".
  (void)p, (void)m, (void)costs, (void)limit_microbatches;
  return Unimplemented("pipeline", "B", "ZeroBubbleGreedy");
}

absl::StatusOr<Schedule> InterleavedOneFOneB(int p, int m, int v, int group) {
  // TODO(pipeline stage B, stretch): Megatron-LM's interleaved 1F1B, v chunks per rank, fused backward.
  // name = "interleaved 1F1B (v=<v>)", schedule.v = v.
  //  1. p < 1, m < 1 or v < 1: InvalidArgument.
  //  2. v = 1: the stages of OneFOneB(p, m) (any m; `group` is not used).
  //  3. v > 1: N = group, or p when group is 0. InvalidArgument (naming N, p and m) when N < p, N > m, or
  //     0 < m mod N < p (a last group shorter than p), e.g. "m = 6 leaves a last group of 2, fewer than
  //     p = 4: make m a multiple of N, or choose N with m mod N >= p".
  //  4. The order of (microbatch, chunk) on every rank: for each group of N microbatches (the last one may
  //     be shorter), chunk 0 for each of them, then chunk 1, ... The k-th forward is the k-th pair; the
  //     k-th backward is the same microbatch on chunk v - 1 - c (the gradient enters at the last chunk).
  //  5. Rank s: w = min(v m, 2(p-s-1) + (v-1) N) warm-up forwards; then for k = 0 .. v m - 1: forward k + w
  //     if there is one, then backward k.
  //  Check with the simulator: per-chunk costs T/v give the bubble (p-1)(T_F+T_B+T_W)/v.
  (void)p, (void)m, (void)v, (void)group;
  return Unimplemented("pipeline", "B", "InterleavedOneFOneB");
}

double InterleavedBubbleFraction(int p, int m, int v) {
  // TODO(pipeline stage B, stretch): interleaved 1F1B's bubble over the ideal step m (T_F+T_B+T_W).
  // Derive it: how long are the fill and the drain when each op costs 1/v of a stage's op?
  (void)p, (void)m, (void)v;
  throw NotImplementedError("pipeline", "B", "InterleavedBubbleFraction");
}

}  // namespace distlab::pipeline
