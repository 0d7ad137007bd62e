// Lab 5 (pipeline), stage B: schedules that split the backward into B (input gradient) and W (weight
// gradient) and move the W passes into the bubbles -- ZB-H1, ZB-H2 and the greedy schedule of the Zero Bubble
// paper -- and, as a stretch, Megatron-LM's interleaved 1F1B. The vocabulary (p, m, F, B, W, T_F, T_B, T_W)
// and the Schedule type are schedule.h's.
#ifndef DISTLAB_LABS_PIPELINE_ZERO_BUBBLE_H_
#define DISTLAB_LABS_PIPELINE_ZERO_BUBBLE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "labs/pipeline/schedule.h"

namespace distlab::pipeline {

// A memory-limited greedy list schedule with the backward split into B and W, simulated as it is built
// (times from `costs`; an input from a neighbour arrives costs.comm after the op that made it ends). Each
// stage, whenever it is free, starts (in this priority): B of its oldest microbatch past F whose input
// gradient has arrived (the last stage: its own F has ended); else F of its next microbatch if fewer than
// max_in_flight[s] microbatches sit between F and B and the activation has arrived (stage 0: at time 0);
// else W of its oldest microbatch past B. The tie-breaks, exactly:
//   - an input that arrives at the very moment the stage becomes free has arrived (arrival <= free time; at
//     unit costs most arrivals coincide with free times, so this decides ZB-H1 and ZB-H2);
//   - W is never waited for: a stage with a W to do runs it rather than idle, even if a B arrives an
//     instant later;
//   - when nothing can start at the free time, the stage waits for the candidate that can start earliest,
//     B before F when both can start at the same time;
//   - across stages, the op that starts earliest is placed first, the lower stage on a tie (this order does
//     not change the schedule: an op affects its neighbours only when it ends).
// Errors (InvalidArgument): p < 1, m < 1, max_in_flight.size() != p, a limit < 1, T_F, T_B or T_W <= 0,
// comm < 0.
absl::StatusOr<Schedule> GreedySplitSchedule(int p, int m, const Costs& costs,
                                             const std::vector<int>& max_in_flight);

// ZB-H1: 1F1B's memory (stage s holds at most p-s microbatches) with W split off and delayed into the
// bubbles; the greedy order above for T_F = T_B = T_W = 1, comm = 0, kept fixed whatever the costs it is
// simulated with. name = "ZB-H1". Its bubble is notes/05-pipeline.md section 5's derivation.
absl::StatusOr<Schedule> ZeroBubbleH1(int p, int m);

// ZB-H2: the same greedy order at T_F = T_B = T_W = 1, comm = 0, with extra warm-up forwards: each stage
// may hold as many microbatches as it can start forwards (one after the other, from its first) before B0
// can start on it, so that no stage ever waits for its first B and the busy region becomes a parallelogram.
// name = "ZB-H2". The limit per stage and the bubble are notes/05-pipeline.md section 5's exercise
// (zero_bubble_test: ZeroBubbleH2.ThreeStagesByHand draws p = 3).
absl::StatusOr<Schedule> ZeroBubbleH2(int p, int m);

// The Zero Bubble paper's Table 2 (comm = 0, m >= 2p-1): bubble per step (the simulator's `bubble`) and
// peak activations of stage 0 in M_B, as closed forms in p, T_F, T_B, T_W. Return them as the paper writes
// them, derived for T_W <= T_F, for any costs: not clamped where a heavier W leaves the simulator above them
// (a value may even be negative). zero_bubble_test: ZeroBubbleTable2.ByHand draws both cases.
struct Table2Row {
  double bubble = 0;         // in the costs' time unit
  int peak_activations = 0;  // in M_B, stage 0
};
enum class Table2Schedule { kOneFOneB, kZeroBubbleH1, kZeroBubbleH2 };
Table2Row ZeroBubbleTable2(Table2Schedule which, int p, const Costs& costs);

// Stretch: ZB-1p / ZB-2p in spirit -- the greedy schedule for the real costs with the same memory limit on
// every stage (limit p or 2p microbatches).
absl::StatusOr<Schedule> ZeroBubbleGreedy(int p, int m, const Costs& costs, int limit_microbatches);

// Stretch: interleaved 1F1B (Megatron-LM's virtual pipeline), v chunks per rank, fused backward.
//   v = 1: one chunk per rank is plain 1F1B -- the stages of OneFOneB(p, m), for any m >= 1 (Megatron-LM too
//          turns a virtual size of 1 into its non-interleaved schedule); `group` is not used.
//   v > 1: microbatches go through the chunks in groups of N = `group` (0: N = p, Megatron-LM's default;
//          its --microbatch-group-size-per-virtual-pipeline-stage): microbatches 0..N-1 through chunk 0,
//          the same N through chunk 1, ..., then the next N; the last group holds the m mod N left over
//          when m is not a multiple of N. A rank's k-th forward is the k-th (microbatch, chunk) of that
//          order; its k-th backward is of the same microbatch, on the chunk the data flow dictates
//          (Megatron-LM: get_model_chunk_id(k, forward=False); zero_bubble_test:
//          InterleavedOneFOneB.TwoChunksOnTwoRanksByHand draws p = 2, m = 2, v = 2). Warm-up:
//          min(v m, 2(p-s-1) + (v-1) N) forwards; then one forward, one backward; then the cool-down
//          backwards.
//   name = "interleaved 1F1B (v=<v>)".
// Errors (InvalidArgument): p < 1, m < 1, v < 1; for v > 1 also N < p or N > m, and a last group of fewer
// than p microbatches (0 < m mod N < p: its round trip would not close; Megatron-LM refuses it too). With the
// default N = p that is "m must be a multiple of p": InterleavedOneFOneB(4, 6, 2) is an error naming N, the
// last group of 2 and p, and saying what to change ("... make m a multiple of N, or choose N with m mod N
// >= p": tests look for "multiple"); InterleavedOneFOneB(4, 6, 2, 6) runs one group of 6.
absl::StatusOr<Schedule> InterleavedOneFOneB(int p, int m, int v, int group = 0);

// The bubble of interleaved 1F1B (per-chunk op costs T/v, comm = 0) over the ideal step m (T_F+T_B+T_W) --
// over the ideal work, unlike GPipeBubbleFraction's share of the step. A closed form in p, m and v; derive
// it in notes/05-pipeline.md section 6.
double InterleavedBubbleFraction(int p, int m, int v);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_ZERO_BUBBLE_H_
