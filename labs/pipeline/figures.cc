// Lab 5 (pipeline), stage D: timeline figures. Read figures.h for what the boxes must be.
#include "labs/pipeline/figures.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

std::vector<viz::Timeline::Box> TimelineBoxes(const std::vector<std::vector<TimedOp>>& timeline) {
  // TODO(pipeline stage D): the boxes of the figure (figures.h lists the rules).
  //  1. makespan = the latest end over all stages; gaps of at most 1e-9 x makespan are not idle.
  //  2. Per stage s (row s): an idle box for the gap before each op, then the op's box; after the last op,
  //     an idle box up to the makespan.
  //  Edge cases: a stage with no ops (one idle box over [0, makespan] unless the makespan is 0); ops that
  //  start at 0 (no idle box before them).
  (void)timeline;
  throw NotImplementedError("pipeline", "D", "TimelineBoxes");
}

absl::Status WriteTimelineFigure(const std::vector<std::vector<TimedOp>>& timeline, const std::string& title,
                                 const std::string& unit, const std::string& path) {
  // TODO(pipeline stage D): draw TimelineBoxes(timeline) with viz::Timeline (rows "stage s", title, x label
  // "time (<unit>)", a legend entry per op kind that appears, and "idle" if any) and write it to `path`.
  //  1. Empty timeline: InvalidArgument. 2. viz's WriteResult error: return it as an error status.
  (void)timeline, (void)title, (void)unit, (void)path;
  return Unimplemented("pipeline", "D", "WriteTimelineFigure");
}

}  // namespace distlab::pipeline
