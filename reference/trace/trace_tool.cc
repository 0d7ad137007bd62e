// trace_tool: what to do with trace files (trace.h) besides opening them in Perfetto or chrome://tracing.
//
//   trace_tool merge -o run.json run.json.rank0.json run.json.rank1.json ...   one file, one clock
//   trace_tool check run.json                                                  the format checks
//   trace_tool svg run.json -o run.svg [--title T] [--cat comm,pipeline] [--from-us A --to-us B]
//   trace_tool last run.json [--cat comm]      the last event of every rank (what each was doing at the end)
//
// `labctl launch` runs `merge` itself when DISTLAB_TRACE is set; `labctl trace ...` runs this tool.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reference/trace/trace_file.h"
#include "reference/trace/trace_svg.h"
#include "tools/base/cli.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "trace_tool: %s\n", msg.c_str());
  return 1;
}

bool ReadJson(const std::string& path, nlohmann::json* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    *error = path + " is not JSON";
    return false;
  }
  return true;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"merge, check and draw distlab trace files (Chrome trace-event JSON)"};
  app.require_subcommand(1);
  std::vector<std::string> parts;
  std::string out, in, title = "trace", cats;
  double from_us = 0, to_us = 0;
  bool remove_parts = false;
  int width = 960;

  distlab::cli::App* merge =
      app.add_subcommand("merge", "join the parts of a multi-process run into one file");
  merge->add_option("-o,--out", out, "the merged file")->required();
  merge->add_option("parts", parts, "part files (rank 0 first: its machine's clock is the reference)")
      ->required();
  merge->add_flag("--remove-parts", remove_parts, "delete the parts once the merged file is written");

  distlab::cli::App* check =
      app.add_subcommand("check", "the format checks (balanced, per-thread order, names)");
  check->add_option("file", in, "trace file")->required();

  distlab::cli::App* svg = app.add_subcommand("svg", "draw the trace: one row per thread of every rank");
  svg->add_option("file", in, "trace file")->required();
  svg->add_option("-o,--out", out, "SVG file")->required();
  svg->add_option("--title", title, "figure title");
  svg->add_option("--cat", cats, "only these categories, comma-separated");
  svg->add_option("--from-us", from_us, "window start (microseconds of the trace)");
  svg->add_option("--to-us", to_us, "window end (microseconds of the trace)");
  svg->add_option("--width", width, "width in pixels");

  distlab::cli::App* last = app.add_subcommand("last", "the last event of every rank");
  last->add_option("file", in, "trace file")->required();
  last->add_option("--cat", cats, "only this category");
  DISTLAB_CLI_PARSE(app, argc, argv);

  std::string error;
  if (*merge) {
    std::vector<nlohmann::json> docs;
    for (const std::string& p : parts) {
      nlohmann::json j;
      if (!ReadJson(p, &j, &error)) return Fail(error);
      docs.push_back(std::move(j));
    }
    absl::StatusOr<nlohmann::json> merged = distlab::trace::MergeParts(docs, parts);
    if (!merged.ok()) return Fail(std::string(merged.status().message()));
    std::ofstream f(out);
    f << merged->dump(1) << "\n";
    if (!f) return Fail("cannot write " + out);
    if (remove_parts) {
      for (const std::string& p : parts) std::remove(p.c_str());
    }
    std::printf("trace: %s (%zu parts); open it in https://ui.perfetto.dev or chrome://tracing\n",
                out.c_str(), parts.size());
    return 0;
  }
  if (*check) {
    nlohmann::json j;
    if (!ReadJson(in, &j, &error)) return Fail(error);
    const std::vector<std::string> problems = distlab::trace::CheckTrace(j);
    for (const std::string& p : problems) std::printf("%s: %s\n", in.c_str(), p.c_str());
    if (!problems.empty()) return 1;
    std::printf("%s: well formed (%zu events)\n", in.c_str(), j["traceEvents"].size());
    return 0;
  }
  absl::StatusOr<distlab::trace::TraceDoc> doc = distlab::trace::ReadTrace(in);
  if (!doc.ok()) return Fail(std::string(doc.status().message()));
  if (*svg) {
    distlab::trace::SvgOptions o;
    o.title = title;
    o.categories = SplitCommas(cats);
    o.from_us = from_us;
    o.to_us = to_us;
    o.width = width;
    if (absl::Status s = distlab::trace::WriteSvg(*doc, o, out); !s.ok())
      return Fail(std::string(s.message()));
    return 0;
  }
  for (const auto& [pid, e] : distlab::trace::LastEventOfEachPid(*doc, cats)) {
    std::printf("pid %d: %s [%s] at %.3f ms for %.3f ms %s\n", pid, e.name.c_str(), e.cat.c_str(), e.ts / 1e3,
                e.dur / 1e3, e.args.dump().c_str());
  }
  return 0;
}
