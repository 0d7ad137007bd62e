// Lab 5 (pipeline), stage A: the validator, GPipe and 1F1B, and their closed forms. Read
// notes/05-pipeline.md sections 1-3 first; schedule.h has the contract of each function.
#include "labs/pipeline/schedule.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

absl::Status ValidateSchedule(const Schedule& schedule) {
  // TODO(pipeline stage A): ValidateSchedule -- contract: schedule.h (ValidateSchedule);
  //   idea: notes/05-pipeline.md §1. Name ops with ToString(op) and stages as "stage <s>"; the order of the
  //   checks and the deadlock's wording are schedule.h's. VirtualStage places a chunk's op in the data flow.
  //   Each list can be fine on its own: how do you find stages that wait on each other, without times?
  (void)schedule;
  return Unimplemented("pipeline", "A", "ValidateSchedule");
}

absl::StatusOr<Schedule> GPipe(int p, int m) {
  // TODO(pipeline stage A): GPipe -- contract: schedule.h (GPipe); idea: notes/05-pipeline.md §2.
  //   name = "GPipe"; fused backwards (BW). Errors: InvalidArgument for p < 1 or m < 1, naming the value.
  (void)p, (void)m;
  return Unimplemented("pipeline", "A", "GPipe");
}

absl::StatusOr<Schedule> OneFOneB(int p, int m) {
  // TODO(pipeline stage A): OneFOneB -- contract: schedule.h (OneFOneB); idea: notes/05-pipeline.md §3.
  //   name = "1F1B"; fused backwards (BW). Lab 7 links this function: keep schedule.h's op order exactly.
  //   Errors: InvalidArgument for p < 1 or m < 1.
  //   Once a stage has warmed up, whose backward is the oldest it can run?
  (void)p, (void)m;
  return Unimplemented("pipeline", "A", "OneFOneB");
}

double GPipeBubbleFraction(int p, int m) {
  // TODO(pipeline stage A): GPipeBubbleFraction -- contract: schedule.h (GPipeBubbleFraction);
  //   idea: notes/05-pipeline.md §2. A closed form: no schedule, no simulation.
  //   How many slots does a stage wait before its first forward, and after its last?
  (void)p, (void)m;
  throw NotImplementedError("pipeline", "A", "GPipeBubbleFraction");
}

double OneFOneBMakespan(int p, int m, const Costs& costs) {
  // TODO(pipeline stage A): OneFOneBMakespan -- contract: schedule.h (OneFOneBMakespan);
  //   idea: notes/05-pipeline.md §3. A closed form: no schedule, no simulation.
  //   Follow the last stage: when does it start, does it ever wait?
  (void)p, (void)m, (void)costs;
  throw NotImplementedError("pipeline", "A", "OneFOneBMakespan");
}

}  // namespace distlab::pipeline
