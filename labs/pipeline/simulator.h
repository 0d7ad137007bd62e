// Lab 5 (pipeline), stage A: an event simulator that turns a schedule and per-op costs into a timeline.
//
// Each stage runs its list in order; an op starts when the stage is free and its dependencies have arrived
// (the dependency's end + Costs::comm when it comes from another stage). Costs: F = T_F, B = T_B, W = T_W,
// BW = T_B + T_W, per op -- for an interleaved schedule (v > 1) the cost of one chunk's op, typically a
// stage's cost / v. Dependencies follow the virtual stages (schedule.h). Memory is counted in units of M_B
// (of M_B / v, one chunk's share, when v > 1): microbatch i occupies a stage from the start of F i to the
// end of B i (or BW i). W i needs only the smaller weight-gradient state (M_W in the Zero Bubble paper),
// which this model does not count.
//
// Two bubble measures, because they differ exactly where zero bubble gets interesting:
//   bubble_rate = (makespan - v m (T_F+T_B+T_W)) / makespan    one step, with the optimizer waiting for all
//   bubble      = max over stages of (end_s - start_s - busy_s) the idle time inside each stage's own span:
//                 the per-step bubble once steps overlap (no optimizer-step synchronisation between them);
//                 this is the Zero Bubble paper's Table 2 quantity. With comm = 0, stage 0 starts at 0 and
//                 for GPipe and 1F1B both agree: bubble = makespan - m (T_F+T_B+T_W).
#ifndef DISTLAB_LABS_PIPELINE_SIMULATOR_H_
#define DISTLAB_LABS_PIPELINE_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "labs/pipeline/schedule.h"

namespace distlab::pipeline {

// One op placed in time on one stage.
struct TimedOp {
  Op op;
  double start = 0;
  double end = 0;
};

struct SimResult {
  double makespan = 0;                         // end of the last op of any stage (the first starts at 0)
  std::vector<double> busy;                    // [s] sum of op costs on stage s
  std::vector<double> idle;                    // [s] makespan - busy[s]
  std::vector<double> first_start;             // [s] start of stage s's first op
  std::vector<double> last_end;                // [s] end of stage s's last op
  double bubble = 0;                           // max_s (last_end[s] - first_start[s] - busy[s])
  double bubble_rate = 0;                      // (makespan - v m (T_F+T_B+T_W)) / makespan
  std::vector<int> peak_activations;           // [s] most (chunk, microbatch) pairs between F start and B/BW
                                               //     end: in M_B (in M_B / v when the schedule has v chunks)
  std::vector<std::vector<TimedOp>> timeline;  // [s] the ops of stage s in the order they ran
};

// Validates `schedule` (ValidateSchedule's errors pass through), then checks the costs: T_F > 0, T_B > 0,
// T_W >= 0 and comm >= 0, else InvalidArgument naming the costs. T_W = 0 is allowed (a model whose weight
// gradient is free, or a fused-only schedule): a W op then has start == end and BW costs T_B. Then
// simulates. p = 1 works (one stage, no messages).
absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const Costs& costs);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_SIMULATOR_H_
