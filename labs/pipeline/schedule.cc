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
  // TODO(pipeline stage A): check that `schedule` can run; return InvalidArgument naming the first broken
  // rule (put the op, e.g. "B3", its stage and its position in the message).
  //  1. Shape: p >= 1, m >= 1, v >= 1, schedule.stages.size() == p, every op's microbatch in [0, m) and
  //     chunk in [0, v).
  //  2. Counts, per stage and chunk: F i exactly once; the backward as either one BW i or one B i plus one
  //     W i (not both styles for the same microbatch); no duplicates.
  //  3. Order within a stage: B i / BW i after F i; W i after B i (same chunk).
  //  4. Across stages: F i on s needs F i on s-1; B i / BW i on s needs the backward of i on s+1 -- with
  //     chunks, "s" is the virtual stage k = VirtualStage(s, chunk, p) and k-1, k+1 live on ranks
  //     (k-1) % p and (k+1) % p (chunk (k-1) / p, (k+1) / p). Run every
  //     stage's list in order, advancing an op only when its cross-stage dependency has run. If no stage
  //     can advance before all ops ran, the stages wait on each other (a deadlock): name every stage that
  //     is stuck, its position, its op and what it waits for, worded as in schedule.h.
  //  Edge cases: p = 1 (no cross-stage dependencies unless v > 1); m = 1; empty stage lists (missing ops).
  //  Name ops with ToString(op) ("F3", or "F3.1" on chunk 1).
  (void)schedule;
  return Unimplemented("pipeline", "A", "ValidateSchedule");
}

absl::StatusOr<Schedule> GPipe(int p, int m) {
  // TODO(pipeline stage A): every stage runs F0..F(m-1), then BW0..BW(m-1). name = "GPipe".
  //  1. p < 1 or m < 1: InvalidArgument naming the value.
  (void)p, (void)m;
  return Unimplemented("pipeline", "A", "GPipe");
}

absl::StatusOr<Schedule> OneFOneB(int p, int m) {
  // TODO(pipeline stage A): 1F1B with fused backward. name = "1F1B".
  //  1. p < 1 or m < 1: InvalidArgument.
  //  2. Stage s: w = min(p-s-1, m) warm-up forwards F0..F(w-1);
  //  3. then for i = 0..m-1: F(i+w) if i+w < m, then BW i (steady state, then cool-down);
  //  4. so stage s never holds more than p-s microbatches between F and BW.
  (void)p, (void)m;
  return Unimplemented("pipeline", "A", "OneFOneB");
}

double GPipeBubbleFraction(int p, int m) {
  // TODO(pipeline stage A): the share of a GPipe step each stage idles (comm = 0). Derive it from the
  // timeline: how many F slots does a stage wait before its first forward, and after its last?
  (void)p, (void)m;
  throw NotImplementedError("pipeline", "A", "GPipeBubbleFraction");
}

double OneFOneBMakespan(int p, int m, const Costs& costs) {
  // TODO(pipeline stage A): the makespan of 1F1B with fused backward (BW costs T_B + T_W), comm = 0.
  // Hint: follow the last stage -- when does it start, and does it ever wait after that?
  (void)p, (void)m, (void)costs;
  throw NotImplementedError("pipeline", "A", "OneFOneBMakespan");
}

}  // namespace distlab::pipeline
