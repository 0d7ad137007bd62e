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

// A memory-limited greedy list schedule with the backward split into B and W. Each stage, whenever it is
// free, starts (in this priority): B of its oldest microbatch whose input gradient has arrived; else F of
// its next microbatch if fewer than max_in_flight[s] microbatches sit between F and B and the activation
// has arrived; else W of its oldest microbatch past B; else it waits for the next arrival. Ties between
// stages go to the stage that can start earliest, then to the lower stage. Times come from `costs`.
absl::StatusOr<Schedule> GreedySplitSchedule(int p, int m, const Costs& costs,
                                             const std::vector<int>& max_in_flight);

// ZB-H1: 1F1B's memory (stage s holds at most p-s microbatches) with W split off and delayed into the
// bubbles; the greedy order above for T_F = T_B = T_W. Bubble (p-1)(T_F + T_B - T_W).
absl::StatusOr<Schedule> ZeroBubbleH1(int p, int m);

// ZB-H2: extra warm-up forwards (stage s holds at most 2(p-s)-1 microbatches), so the W passes fill the
// whole pipeline into a parallelogram; the greedy order for T_F = T_B = T_W. Bubble (p-1)(T_F+T_B-2T_W).
absl::StatusOr<Schedule> ZeroBubbleH2(int p, int m);

// The Zero Bubble paper's Table 2 (comm = 0, m >= 2p-1): bubble per step and peak activations in M_B.
struct Table2Row {
  double bubble = 0;         // (p-1)(T_F+T_B+T_W), (p-1)(T_F+T_B-T_W) or (p-1)(T_F+T_B-2T_W)
  int peak_activations = 0;  // p, p or 2p-1
};
enum class Table2Schedule { kOneFOneB, kZeroBubbleH1, kZeroBubbleH2 };
Table2Row ZeroBubbleTable2(Table2Schedule which, int p, const Costs& costs);

// Stretch: ZB-1p / ZB-2p in spirit -- the greedy schedule for the real costs with the same memory limit on
// every stage (limit p or 2p microbatches).
absl::StatusOr<Schedule> ZeroBubbleGreedy(int p, int m, const Costs& costs, int limit_microbatches);

// Stretch: interleaved 1F1B (Megatron-LM's virtual pipeline), v chunks per rank, fused backward. Rank s
// runs the forwards of (microbatch, chunk) in groups of p microbatches: its k-th forward is chunk
// (k mod pv) / p of microbatch (k / pv) p + k mod p; its k-th backward the same with the chunks reversed
// (chunk v-1-c). Warm-up: min(v m, 2(p-s-1) + (v-1) p) forwards; then one forward, one backward; then the
// cool-down backwards. Rank s holds at most min(v m, 2(p-s-1) + (v-1) p + 1) chunk activations (units of
// M_B / v: rank 0 holds p + (p-1)/v microbatches' worth). name = "interleaved 1F1B (v=<v>)".
// With per-chunk costs T/v the bubble is (p-1)(T_F+T_B+T_W)/v, a fraction (p-1)/(v m) of the ideal step.
// Errors (InvalidArgument): p < 1, m < 1, v < 1, and m not a multiple of p (the groups of p microbatches
// must come out even).
absl::StatusOr<Schedule> InterleavedOneFOneB(int p, int m, int v);

// The bubble of interleaved 1F1B over the ideal step m (T_F+T_B+T_W): (p-1) / (v m).
double InterleavedBubbleFraction(int p, int m, int v);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_ZERO_BUBBLE_H_
