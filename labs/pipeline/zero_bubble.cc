// Lab 5 (pipeline), stage B: zero-bubble schedules and, as a stretch, interleaved 1F1B. Read
// notes/05-pipeline.md sections 5 and 6 first; zero_bubble.h has the contract of each function.
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
  // TODO(pipeline stage B): GreedySplitSchedule -- contract: zero_bubble.h (GreedySplitSchedule);
  //   idea: notes/05-pipeline.md §5. Keep your own clock per stage as you place ops (Simulate cannot see a
  //   schedule that is not finished); the priorities, the tie-breaks and the errors are zero_bubble.h's.
  //   When one stage places an op, which stages' next choices can change?
  (void)p, (void)m, (void)costs, (void)max_in_flight;
  return Unimplemented("pipeline", "B", "GreedySplitSchedule");
}

absl::StatusOr<Schedule> ZeroBubbleH1(int p, int m) {
  // TODO(pipeline stage B): ZeroBubbleH1 -- contract: zero_bubble.h (ZeroBubbleH1);
  //   idea: notes/05-pipeline.md §5. name = "ZB-H1".
  //   Which arguments of GreedySplitSchedule give 1F1B's memory?
  (void)p, (void)m;
  return Unimplemented("pipeline", "B", "ZeroBubbleH1");
}

absl::StatusOr<Schedule> ZeroBubbleH2(int p, int m) {
  // TODO(pipeline stage B): ZeroBubbleH2 -- contract: zero_bubble.h (ZeroBubbleH2);
  //   idea: notes/05-pipeline.md §5. name = "ZB-H2".
  //   At unit costs, how many forwards can stage s start before B0 can start there?
  (void)p, (void)m;
  return Unimplemented("pipeline", "B", "ZeroBubbleH2");
}

Table2Row ZeroBubbleTable2(Table2Schedule which, int p, const Costs& costs) {
  // TODO(pipeline stage B): ZeroBubbleTable2 -- contract: zero_bubble.h (ZeroBubbleTable2);
  //   idea: notes/05-pipeline.md §5. Closed forms in p, T_F, T_B, T_W: no schedule, no simulation.
  //   Where does stage 0 of ZB-H1 idle: before its first B, and where else?
  (void)which, (void)p, (void)costs;
  throw NotImplementedError("pipeline", "B", "ZeroBubbleTable2");
}

absl::StatusOr<Schedule> ZeroBubbleGreedy(int p, int m, const Costs& costs, int limit_microbatches) {
  // TODO(pipeline stage B, stretch): ZeroBubbleGreedy -- contract: zero_bubble.h (ZeroBubbleGreedy);
  //   idea: notes/05-pipeline.md §5. name = "ZB-greedy(<limit>)".
  (void)p, (void)m, (void)costs, (void)limit_microbatches;
  return Unimplemented("pipeline", "B", "ZeroBubbleGreedy");
}

absl::StatusOr<Schedule> InterleavedOneFOneB(int p, int m, int v, int group) {
  // TODO(pipeline stage B, stretch): InterleavedOneFOneB -- contract: zero_bubble.h (InterleavedOneFOneB);
  //   idea: notes/05-pipeline.md §6. name = "interleaved 1F1B (v=<v>)", schedule.v = v; the errors and
  //   their wording are zero_bubble.h's. OneFOneB is yours to reuse.
  //   Where does a microbatch's gradient enter the model, and so on which chunk is a rank's first backward?
  (void)p, (void)m, (void)v, (void)group;
  return Unimplemented("pipeline", "B", "InterleavedOneFOneB");
}

double InterleavedBubbleFraction(int p, int m, int v) {
  // TODO(pipeline stage B, stretch): InterleavedBubbleFraction -- contract: zero_bubble.h
  //   (InterleavedBubbleFraction); idea: notes/05-pipeline.md §6. A closed form: no schedule, no simulation.
  //   How long are the fill and the drain when each op costs 1/v of a stage's op?
  (void)p, (void)m, (void)v;
  throw NotImplementedError("pipeline", "B", "InterleavedBubbleFraction");
}

}  // namespace distlab::pipeline
