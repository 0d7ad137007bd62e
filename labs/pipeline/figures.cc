// Lab 5 (pipeline), stage D: timeline figures. Read figures.h for what the boxes must be.
#include "labs/pipeline/figures.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::pipeline {

std::vector<viz::Timeline::Box> TimelineBoxes(const std::vector<std::vector<TimedOp>>& timeline) {
  // TODO(pipeline stage D): TimelineBoxes -- contract: figures.h (TimelineBoxes);
  //   idea: notes/05-pipeline.md §8. The boxes, their order and what counts as idle are figures.h's.
  //   Which time does every row of the figure run up to?
  (void)timeline;
  throw NotImplementedError("pipeline", "D", "TimelineBoxes");
}

absl::Status WriteTimelineFigure(const std::vector<std::vector<TimedOp>>& timeline, const std::string& title,
                                 const std::string& unit, const std::string& path) {
  // TODO(pipeline stage D): WriteTimelineFigure -- contract: figures.h (WriteTimelineFigure);
  //   idea: notes/05-pipeline.md §8. viz::Timeline (reference/viz/viz.h) draws rows of boxes and writes
  //   the SVG; Write returns a viz::WriteResult, not a Status.
  //   Errors: InvalidArgument for an empty timeline; Write's error as an error Status.
  (void)timeline, (void)title, (void)unit, (void)path;
  return Unimplemented("pipeline", "D", "WriteTimelineFigure");
}

}  // namespace distlab::pipeline
