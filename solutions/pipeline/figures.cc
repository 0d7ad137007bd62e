// Lab 5 (pipeline), stage D: timeline figures.
#include "labs/pipeline/figures.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace distlab::pipeline {

std::vector<viz::Timeline::Box> TimelineBoxes(const std::vector<std::vector<TimedOp>>& timeline) {
  double makespan = 0;
  for (const auto& row : timeline) {
    for (const TimedOp& t : row) makespan = std::max(makespan, t.end);
  }
  // Gaps shorter than this are rounding, not idle time (the executor's clock never gives exact zeros).
  const double min_gap = 1e-9 * makespan;
  std::vector<viz::Timeline::Box> boxes;
  for (size_t s = 0; s < timeline.size(); ++s) {
    const int row = static_cast<int>(s);
    double cursor = 0;  // the end of what row s has drawn so far
    auto idle_until = [&](double t) {
      if (t - cursor > min_gap) boxes.push_back({row, cursor, t, "", "", kIdleCategory});
    };
    for (const TimedOp& t : timeline[s]) {
      idle_until(t.start);
      boxes.push_back({row, t.start, t.end, ToString(t.op), "", KindCategory(t.op.kind)});
      cursor = std::max(cursor, t.end);
    }
    idle_until(makespan);  // a stage that finishes early idles until the step ends
  }
  return boxes;
}

absl::Status WriteTimelineFigure(const std::vector<std::vector<TimedOp>>& timeline, const std::string& title,
                                 const std::string& unit, const std::string& path) {
  if (timeline.empty())
    return absl::InvalidArgumentError(absl::StrCat("timeline '", title, "' has no stages"));
  viz::Timeline fig;
  std::vector<std::string> rows;
  for (size_t s = 0; s < timeline.size(); ++s) rows.push_back(absl::StrCat("stage ", s));
  fig.Title(title).XLabel(absl::StrCat("time (", unit, ")")).Rows(rows);
  for (const viz::Timeline::Box& b : TimelineBoxes(timeline)) fig.AddBox(b);
  fig.Legend(0, "F").Legend(1, "B").Legend(4, "W").Legend(6, "BW (fused)").Legend(kIdleCategory, "idle");
  const viz::WriteResult r = fig.Write(path);
  if (!r.ok()) return absl::InternalError(r.error);
  return absl::OkStatus();
}

}  // namespace distlab::pipeline
