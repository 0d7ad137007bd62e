// Lab 5 (pipeline), stage A: the event simulator. Read simulator.h for the model and the two bubbles, and
// notes/05-pipeline.md section 4.
#include "labs/pipeline/simulator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const Costs& costs) {
  // TODO(pipeline stage A): Simulate -- contract: simulator.h (Simulate); idea: notes/05-pipeline.md §4.
  //   ValidateSchedule first (RETURN_IF_ERROR: its errors pass through), then the costs. Dependencies run
  //   between virtual stages (VirtualStage); Costs::comm is paid only where a dependency crosses two ranks.
  //   An op can be placed only after what it waits for: in what order do you visit the stages, in O(ops)?
  (void)schedule, (void)costs;
  return Unimplemented("pipeline", "A", "Simulate");
}

}  // namespace distlab::pipeline
