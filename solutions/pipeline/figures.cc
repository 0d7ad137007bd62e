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
  const std::vector<viz::Timeline::Box> boxes = TimelineBoxes(timeline);
  // Wide enough that the shortest op's label fits at 10 px (about 6.6 px a character, 90 + 20 px of
  // margins, a little for the axis running past the makespan), from 860 to 2000 px.
  // The title (15 px bold, about 9 px a character) must fit as well.
  double makespan = 0, need = std::max(860.0, 40 + 9.0 * title.size());
  for (const viz::Timeline::Box& b : boxes) makespan = std::max(makespan, b.end);
  bool kind_seen[4] = {false, false, false, false}, idle_seen = false;
  for (const viz::Timeline::Box& b : boxes) {
    if (b.category == kIdleCategory) {
      idle_seen = true;
      continue;
    }
    for (OpKind k : {OpKind::kForward, OpKind::kBackward, OpKind::kWeight, OpKind::kFullBackward}) {
      if (KindCategory(k) == b.category) kind_seen[static_cast<int>(k)] = true;
    }
    const double duration = b.end - b.start;
    if (duration > 1e-9 * makespan) {
      need = std::max(need, 110 + 1.15 * (6.6 * b.label.size() + 4) * makespan / duration);
    }
  }
  fig.Size(static_cast<int>(std::min(2000.0, need)), 28);
  // The legend lists the kinds the figure shows.
  const char* names[4] = {"F", "B", "W", "BW (fused)"};
  for (OpKind k : {OpKind::kForward, OpKind::kBackward, OpKind::kWeight, OpKind::kFullBackward}) {
    if (kind_seen[static_cast<int>(k)]) fig.Legend(KindCategory(k), names[static_cast<int>(k)]);
  }
  if (idle_seen) fig.Legend(kIdleCategory, "idle");
  for (const viz::Timeline::Box& b : boxes) fig.AddBox(b);
  const viz::WriteResult r = fig.Write(path);
  if (!r.ok()) return absl::InternalError(r.error);
  return absl::OkStatus();
}

}  // namespace distlab::pipeline
