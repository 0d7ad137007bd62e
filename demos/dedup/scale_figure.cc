// Lab 3: the figures of time and memory against corpus size (notes/03-dedup.md §5.1), drawn from the
// summaries the `dedup` tool writes with --summary (collected by demos/dedup/scale_runs.sh into one JSON
// array).
//
//   bazel run //demos/dedup:scale_figure -- --runs notes/figures/dedup-scale.json --out notes/figures
//
// dedup-scale-time.svg: CPU and wall seconds against documents, log-log, with the line through the smallest
// one-rank run that linear growth would follow. dedup-scale-memory.svg: peak RSS against documents, with the
// model of §5.1 (bytes per document times N, plus the smallest run's fixed part) and a third of the text.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace viz = distlab::viz;

namespace {

struct Run {
  double documents = 0, text_mb = 0, wall_s = 0, cpu_s = 0, rss_mb = 0, bytes_per_document = 0;
  int ranks = 1;
  std::string mode;
};

std::string Label(const Run& r) {
  if (r.ranks == 1) return "1 rank";
  return std::to_string(r.ranks) + (r.mode == "processes" ? " procs" : " threads");
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Draw the dedup tool's time and memory against corpus size."};
  std::string runs_path, out = ".";
  app.add_option("--runs", runs_path, "a JSON array of the tool's --summary objects")->required();
  app.add_option("--out", out, "the folder the two SVG files go to")->capture_default_str();
  DISTLAB_CLI_PARSE(app, argc, argv);

  std::ifstream in(runs_path);
  const nlohmann::json all = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (all.is_discarded() || !all.is_array() || all.empty()) {
    std::cerr << "scale_figure: " << runs_path << " is not a JSON array of run summaries\n";
    return 1;
  }
  std::map<std::string, std::vector<Run>> series;  // by label, sorted by documents below
  for (const nlohmann::json& j : all) {
    Run r;
    try {
      r.documents = j.at("documents").get<double>();
      r.text_mb = j.at("text_bytes").get<double>() / 1e6;
      r.wall_s = j.at("wall_s").get<double>();
      r.cpu_s = j.at("cpu_s").get<double>();
      r.rss_mb = j.at("peak_rss_mb").get<double>();
      r.bytes_per_document = j.at("bytes_per_document").get<double>();
      r.ranks = j.at("ranks").get<int>();
      r.mode = j.at("mode").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      std::cerr << "scale_figure: a run in " << runs_path << " lacks a field: " << e.what() << "\n";
      return 1;
    }
    series[Label(r)].push_back(r);
  }
  for (auto& [label, runs] : series) {
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.documents < b.documents; });
  }
  const auto one = series.find("1 rank");
  if (one == series.end()) {
    std::cerr << "scale_figure: no one-rank run to draw the models from\n";
    return 1;
  }
  const Run& base = one->second.front();
  const Run& top = one->second.back();

  viz::LinePlot time;
  time.Title("dedup: time against corpus size (200-word documents)")
      .XLabel("documents")
      .YLabel("seconds")
      .XScale(viz::Scale::kLog10)
      .YScale(viz::Scale::kLog10);
  viz::LinePlot memory;
  memory.Title("dedup: peak resident memory against corpus size")
      .XLabel("documents")
      .YLabel("MB")
      .XScale(viz::Scale::kLog10)
      .YScale(viz::Scale::kLog10);
  for (const auto& [label, runs] : series) {
    std::vector<double> n, wall, cpu, rss;
    for (const Run& r : runs)
      n.push_back(r.documents), wall.push_back(r.wall_s), cpu.push_back(r.cpu_s), rss.push_back(r.rss_mb);
    if (label == "1 rank") time.AddSeries("CPU, 1 rank", n, cpu);
    time.AddSeries("wall, " + label, n, wall);
    memory.AddSeries(
        label == "1 rank" || label.find("threads") != std::string::npos ? label : label + " (sum)", n, rss);
  }
  std::vector<double> n = {base.documents, top.documents};
  time.AddSeries("linear (CPU)", n, {base.cpu_s, base.cpu_s * top.documents / base.documents},
                 /*dashed=*/true);
  // §5.1's model: the bytes held per document times N, plus what the smallest run holds besides them.
  const double per_doc = top.bytes_per_document / 1e6;
  const double fixed = std::max(1.0, base.rss_mb - per_doc * base.documents);
  memory.AddSeries("model " + std::to_string(static_cast<int>(top.bytes_per_document + 0.5)) + " B/doc", n,
                   {fixed + per_doc * base.documents, fixed + per_doc * top.documents}, /*dashed=*/true);
  memory.AddSeries("text / 3", n, {base.text_mb / 3, top.text_mb / 3}, /*dashed=*/true);
  for (const auto& [plot, name] :
       {std::pair<const viz::LinePlot*, const char*>{&time, "dedup-scale-time.svg"},
        {&memory, "dedup-scale-memory.svg"}}) {
    const viz::WriteResult r = plot->Write(out + "/" + name);
    if (!r.ok()) {
      std::cerr << "scale_figure: " << name << ": " << r.error << "\n";
      return 1;
    }
    std::cout << out << "/" << name << "\n";
  }
  return 0;
}
