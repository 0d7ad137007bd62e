// benchsum: prints the ratio counters of Google Benchmark JSON files side by side (labctl bench).
// Absolute times on shared machines are noise (COURSE.md §6); the ratios are what a benchmark reports.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> files;
  CLI::App app{"Google Benchmark JSON -> a table of the counters whose names contain 'ratio'"};
  app.add_option("files", files, "--benchmark_out JSON files")->required();
  CLI11_PARSE(app, argc, argv);
  for (const auto& path : files) {
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "benchsum: cannot read %s\n", path.c_str());
      return 2;
    }
    nlohmann::json j = nlohmann::json::parse(in);
    std::printf("%s\n", path.c_str());
    int shown = 0;
    for (auto& b : j.value("benchmarks", nlohmann::json::array())) {
      std::string line;
      for (auto& [k, v] : b.items()) {
        if (k.find("ratio") == std::string::npos || !v.is_number()) continue;
        char buf[128];
        std::snprintf(buf, sizeof buf, "  %s=%.3f", k.c_str(), v.get<double>());
        line += buf;
      }
      if (line.empty()) continue;
      std::printf("  %-56s%s\n", b.value("name", "").c_str(), line.c_str());
      ++shown;
    }
    if (shown == 0) std::printf("  (no counters named *ratio*)\n");
  }
  return 0;
}
