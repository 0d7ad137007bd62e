// Trace -> SVG with viz::Timeline (trace_svg.h).
#include "reference/trace/trace_svg.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "reference/viz/viz.h"

namespace distlab::trace {
namespace {

std::string ClassOf(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && (std::isdigit(static_cast<unsigned char>(name[end - 1])) || name[end - 1] == ' ')) --end;
  return end == 0 ? name : name.substr(0, end);
}

bool Wanted(const TraceEvent& e, const SvgOptions& o) {
  if (!o.categories.empty() &&
      std::find(o.categories.begin(), o.categories.end(), e.cat) == o.categories.end()) {
    return false;
  }
  if (o.to_us > o.from_us && (e.end() < o.from_us || e.ts > o.to_us)) return false;
  return true;
}

}  // namespace

absl::Status RenderSvg(const TraceDoc& doc, const SvgOptions& o, std::string* svg) {
  TraceDoc kept;
  kept.process_names = doc.process_names;
  kept.thread_names = doc.thread_names;
  std::set<std::pair<int, int>> tracks;
  double t0 = 1e300, t1 = -1e300;
  for (const TraceEvent& e : doc.events) {
    if (!Wanted(e, o)) continue;
    kept.events.push_back(e);
    tracks.insert({e.pid, e.tid});
    t0 = std::min(t0, e.ts);
    t1 = std::max(t1, e.end());
  }
  if (kept.events.empty())
    return absl::InvalidArgumentError("trace figure '" + o.title + "': no events to draw");
  if (o.to_us > o.from_us) t0 = o.from_us, t1 = std::min(t1, o.to_us);
  const bool ms = t1 - t0 >= 2000;  // microseconds for short windows, milliseconds otherwise
  const double unit = ms ? 1000.0 : 1.0;

  viz::Timeline fig;
  fig.Title(o.title).XLabel(ms ? "time (ms)" : "time (us)").Size(o.width, o.row_height);
  std::vector<std::string> rows;
  std::map<std::pair<int, int>, int> row_of;
  for (const auto& track : tracks) {
    const auto tn = doc.thread_names.find(track);
    std::string label = tn != doc.thread_names.end() ? tn->second : "";
    if (label.empty()) {
      const auto pn = doc.process_names.find(track.first);
      label = (pn != doc.process_names.end() ? pn->second : "pid " + std::to_string(track.first)) + " tid " +
              std::to_string(track.second);
    }
    row_of[track] = static_cast<int>(rows.size());
    rows.push_back(label);
  }
  fig.Rows(rows);
  std::map<std::string, int> palette = o.palette;
  std::set<int> used;
  for (const auto& [cls, idx] : palette) used.insert(idx);
  std::vector<std::pair<int, std::string>> legend;
  auto color_of = [&](const std::string& cls) {
    auto it = palette.find(cls);
    if (it == palette.end()) {
      int next = 0;
      while (used.count(next)) ++next;
      used.insert(next);
      it = palette.emplace(cls, next).first;
    }
    if (std::find_if(legend.begin(), legend.end(), [&](const auto& l) { return l.second == cls; }) ==
        legend.end()) {
      legend.emplace_back(it->second, cls);
    }
    return it->second;
  };
  for (const auto& track : tracks) {
    for (const TraceEvent& e : TopLevel(kept, track.first, track.second)) {
      viz::Timeline::Box b;
      b.row = row_of[track];
      b.start = (std::max(e.ts, t0) - t0) / unit;
      b.end = (std::min(e.end(), t1) - t0) / unit;
      if (b.end < b.start) continue;
      b.category = color_of(ClassOf(e.name));
      b.label = e.name;  // the Timeline shrinks it to fit its box, or leaves it out
      fig.AddBox(b);
    }
  }
  for (const auto& [idx, cls] : legend) fig.Legend(idx, cls);
  const viz::WriteResult r = fig.Render(svg);
  if (!r.ok()) return absl::InternalError(r.error);
  return absl::OkStatus();
}

absl::Status WriteSvg(const TraceDoc& doc, const SvgOptions& o, const std::string& path) {
  std::string svg;
  if (absl::Status s = RenderSvg(doc, o, &svg); !s.ok()) return s;
  const viz::WriteResult r = viz::WriteTextFile(path, svg);
  if (!r.ok()) return absl::UnavailableError(r.error);
  return absl::OkStatus();
}

}  // namespace distlab::trace
