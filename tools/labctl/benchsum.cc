// benchsum: prints the ratio counters of Google Benchmark JSON files side by side (labctl bench).
// Absolute times on shared machines are noise (docs/design.md §7); the ratios are what a benchmark reports.
// With --summary FILE it also writes them all into one JSON document a program reads without scraping.
//
// A ratio is a counter whose name contains "ratio" or "frac", or one the benchmark describes with
// DISTLAB_BENCH_RATIO (tools/bench/ratio.h: what it is a ratio of, the bound, the counter holding the
// bound's value, a goal). The summary (schema "distlab.bench-summary.v1"):
//   {"schema": ..., "files": [...], "ratios": [{"benchmark": "BM_AllReduceF32Sum/4/0/...", "family": ...,
//     "counter": "ratio", "value": 0.97, "of": "...", "bound": "...", "bound_value": 12.1 (the bound
//     counter's value, when named), "goal": 0.8, "higher_is_better": true, "meets_goal": true,
//     "file": "out/bench/comm_bench.json", "label": "threads"}, ...],
//    "undescribed": ["<file>: <family>:<counter>", ...]}
// Fields a benchmark did not describe are null ("of", "bound") or absent ("bound_value", "goal",
// "meets_goal"); every undescribed ratio is also listed under "undescribed" and named on stderr.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"

namespace {

using json = nlohmann::ordered_json;

// "BM_AllReduceF32Sum/4/0/real_time" -> "BM_AllReduceF32Sum"; "BM_Make<pl::OneFOneB>/64" -> "BM_Make".
std::string Family(const std::string& name) { return name.substr(0, name.find_first_of("/<")); }

bool NamedLikeRatio(const std::string& k) {
  return k.find("ratio") != std::string::npos || k.find("frac") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::string summary_path;
  distlab::cli::App app{
      "Google Benchmark JSON -> a table of the ratio counters (and a summary JSON with --summary)"};
  app.add_option("files", files, "--benchmark_out JSON files")->required();
  app.add_option("--summary", summary_path, "write every ratio, with what it compares, to this JSON file");
  DISTLAB_CLI_PARSE(app, argc, argv);

  json ratios = json::array();
  json undescribed = json::array();
  for (const auto& path : files) {
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "benchsum: cannot read %s\n", path.c_str());
      return 2;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "benchsum: %s is not JSON: %s\n", path.c_str(), e.what());
      return 2;
    }
    // The descriptions: context entries "ratio:<family>:<counter>" holding a JSON object.
    std::map<std::string, nlohmann::json> described;
    const nlohmann::json context = j.value("context", nlohmann::json::object());
    for (auto& [k, v] : context.items()) {
      if (k.rfind("ratio:", 0) != 0 || !v.is_string()) continue;
      try {
        described[k.substr(6)] = nlohmann::json::parse(v.get<std::string>());
      } catch (const std::exception&) {
        std::fprintf(stderr, "benchsum: %s: context %s is not a JSON object\n", path.c_str(), k.c_str());
      }
    }
    std::printf("%s\n", path.c_str());
    int shown = 0;
    std::set<std::string> missing;
    const nlohmann::json benchmarks = j.value("benchmarks", nlohmann::json::array());
    for (const auto& b : benchmarks) {
      const std::string name = b.value("name", "");
      const std::string family = Family(name);
      std::string line;
      for (auto& [k, v] : b.items()) {
        const auto d = described.find(family + ":" + k);
        const bool is_ratio = NamedLikeRatio(k) || d != described.end();
        if (k == "iterations" || !is_ratio || !v.is_number()) continue;
        const double value = v.get<double>();
        char buf[128];
        std::snprintf(buf, sizeof buf, "  %s=%.3f", k.c_str(), value);
        line += buf;
        json r = {{"benchmark", name}, {"family", family}, {"counter", k}, {"value", value}};
        if (d == described.end()) {
          r["of"] = nullptr;
          r["bound"] = nullptr;
          missing.insert(family + ":" + k);
        } else {
          const nlohmann::json& info = d->second;
          r["of"] = info.value("of", "");
          r["bound"] = info.value("bound", "");
          const std::string bc = info.value("bound_counter", "");
          if (!bc.empty() && b.contains(bc) && b[bc].is_number()) r["bound_value"] = b[bc].get<double>();
          const bool higher = info.value("higher_is_better", true);
          r["higher_is_better"] = higher;
          if (info.contains("goal")) {
            const double goal = info["goal"].get<double>();
            r["goal"] = goal;
            r["meets_goal"] = higher ? value >= goal : value <= goal;
          }
        }
        r["file"] = path;
        if (b.contains("label")) r["label"] = b["label"];
        ratios.push_back(std::move(r));
      }
      if (line.empty()) continue;
      std::printf("  %-56s%s\n", name.c_str(), line.c_str());
      ++shown;
    }
    if (shown == 0) std::printf("  (no ratio counters)\n");
    for (const std::string& m : missing) {
      std::fprintf(stderr, "benchsum: %s: ratio %s has no DISTLAB_BENCH_RATIO description\n", path.c_str(),
                   m.c_str());
      undescribed.push_back(path + ": " + m);
    }
  }
  if (!summary_path.empty()) {
    json doc = {{"schema", "distlab.bench-summary.v1"},
                {"files", files},
                {"ratios", ratios},
                {"undescribed", undescribed}};
    std::ofstream out(summary_path);
    out << doc.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "benchsum: cannot write %s\n", summary_path.c_str());
      return 2;
    }
    std::printf("summary of %zu ratios: %s\n", ratios.size(), summary_path.c_str());
  }
  return 0;
}
