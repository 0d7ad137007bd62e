// Lab 5 (pipeline), stage D: timeline figures -- one row per stage, one box per op, idle time drawn.
//
// The same picture serves the simulator (time in units of the costs) and the executor (time in ms): both
// produce per-stage lists of TimedOp. Colours come from the course palette (reference/viz):
//   F blue (category 0), B orange (1), W green (4), fused BW purple (6), idle light grey (9).
#ifndef DISTLAB_LABS_PIPELINE_FIGURES_H_
#define DISTLAB_LABS_PIPELINE_FIGURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "labs/pipeline/simulator.h"
#include "reference/viz/viz.h"

namespace distlab::pipeline {

inline constexpr int kIdleCategory = 9;
// The palette category of an op kind: F 0, B 1, W 4, BW 6.
inline int KindCategory(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return 0;
    case OpKind::kBackward:
      return 1;
    case OpKind::kWeight:
      return 4;
    case OpKind::kFullBackward:
      return 6;
  }
  return 0;
}

// The boxes of a timeline figure, row s = stage s:
//  1. one box per op: start, end, label ToString(op) ("F3"), category KindCategory(kind), color "";
//  2. one idle box (label "", category kIdleCategory) for every gap longer than 1e-9 x the makespan between
//     0 and the first op, between consecutive ops, and between the last op and the makespan (the latest end
//     over all stages);
//  3. boxes of a row in time order; rows in stage order.
std::vector<viz::Timeline::Box> TimelineBoxes(const std::vector<std::vector<TimedOp>>& timeline);

// Writes the figure to `path` (SVG): rows "stage 0".."stage p-1", the boxes above, a legend of the op kinds
// that appear (F, B, W, BW (fused)) and "idle" if there is idle time, `title`, and the x label
// "time (<unit>)". An empty timeline or an unwritable path is an error. (The reference solution also widens
// the figure, up to 2000 px, until the shortest op's label fits its box; viz draws a label that still does
// not fit smaller, or leaves it out.)
absl::Status WriteTimelineFigure(const std::vector<std::vector<TimedOp>>& timeline, const std::string& title,
                                 const std::string& unit, const std::string& path);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_FIGURES_H_
