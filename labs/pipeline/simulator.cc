// Lab 5 (pipeline), stage A: the event simulator. Read simulator.h for the model and the two bubbles.
#include "labs/pipeline/simulator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const Costs& costs) {
  // TODO(pipeline stage A): place every op of `schedule` in time.
  //  1. RETURN_IF_ERROR(ValidateSchedule(schedule)); then costs: T_F > 0, T_B > 0, T_W >= 0, comm >= 0,
  //     else InvalidArgument naming the bad cost.
  //  2. Each stage runs its list in order. An op starts at the later of: the end of the stage's previous op;
  //     for F i on s > 0, the end of F i on s-1 plus comm; for B i / BW i on s < p-1, the end of the
  //     backward of i on s+1 plus comm. Durations: F = T_F, B = T_B, W = T_W, BW = T_B + T_W.
  //     Interleaved (schedule.v > 1): the neighbours are virtual stages -- op.chunk of stage s is
  //     k = VirtualStage(s, chunk, p), fed by k-1 (rank (k-1) % p) and sent its gradient by k+1; keep end
  //     times per virtual stage, wake the neighbour's rank, and add comm only between different ranks.
  //     Visit ops so that dependencies come first (e.g. a worklist of stages: a stage runs until it meets an
  //     op whose dependency has not run, and is woken when it has). Aim for O(total ops).
  //  3. Fill SimResult: makespan, busy/idle, first_start/last_end, timeline (ops in run order),
  //     bubble = max over stages of (last_end - first_start - busy), bubble_rate (ideal work v m (F+B+W)).
  //  4. peak_activations[s]: microbatch i counts from the START of F i to the END of its B i / BW i (per
  //     chunk when v > 1).
  //  Edge cases: p = 1; T_W = 0 with split ops; comm > 0 (it delays every cross-stage dependency); p = 1
  //  with v > 1 (chunks of one rank: no comm).
  (void)schedule, (void)costs;
  return Unimplemented("pipeline", "A", "Simulate");
}

}  // namespace distlab::pipeline
