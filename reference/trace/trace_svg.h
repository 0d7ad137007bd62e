// A trace drawn as a figure: one row per thread of every rank (pid, tid), one box per top-level event,
// coloured by what it is. For the notes, where no browser opens the trace itself (reference/viz's Timeline).
#ifndef DISTLAB_REFERENCE_TRACE_TRACE_SVG_H_
#define DISTLAB_REFERENCE_TRACE_TRACE_SVG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "reference/trace/trace_file.h"

namespace distlab::trace {

struct SvgOptions {
  std::string title = "trace";
  // Only events of these categories ("comm", "comm.stream", "pipeline", ...); empty: all.
  std::vector<std::string> categories;
  // The window shown, in microseconds of the trace; to_us <= from_us: everything.
  double from_us = 0, to_us = 0;
  // Colour classes: an event's class is its name without trailing digits and spaces ("F12" -> "F",
  // "AllReduce" -> "AllReduce"). A class listed here gets that palette index; the others get the next
  // unused ones in order of appearance.
  std::map<std::string, int> palette;
  int width = 960;
  int row_height = 22;
};

// The figure as an SVG document (an error when no event is left to draw).
absl::Status RenderSvg(const TraceDoc& doc, const SvgOptions& options, std::string* svg);
absl::Status WriteSvg(const TraceDoc& doc, const SvgOptions& options, const std::string& path);

}  // namespace distlab::trace

#endif  // DISTLAB_REFERENCE_TRACE_TRACE_SVG_H_
