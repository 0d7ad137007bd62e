// Reading and writing tests/<lab>/grading.json (see grading_data.h).
#include "tools/grader/grading_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "nlohmann/json.hpp"
#include "xxhash.h"

namespace distlab::grader {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

GradingData ReadGradingData(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  GradingData d;
  d.lab = j.value("lab", std::string());
  d.inputs = j.value("inputs", std::string());
  d.seed = j.value("seed", uint64_t{1});
  // (each value() is a copy: kept in a local, so that items() never walks a destroyed temporary)
  const json timings = j.value("timings", json::object());
  for (auto& [test, cases] : timings.items()) {
    for (auto& [c, s] : cases.items()) d.timings[test][c] = s.get<double>();
  }
  const json signatures = j.value("signatures", json::object());
  for (auto& [m, sig] : signatures.items()) {
    MutantSignature s;
    s.inputs = sig.value("inputs", std::string());
    const json tests = sig.value("tests", json::object());
    for (auto& [test, cases] : tests.items()) {
      auto& set = s.tests[test];
      for (auto& c : cases) set.insert(c.get<std::string>());
    }
    d.signatures[m] = s;
  }
  return d;
}

void WriteGradingData(const std::string& path, const GradingData& d) {
  json timings = json::object();
  for (const auto& [test, cases] : d.timings) {
    for (const auto& [c, s] : cases)
      timings[test][c] = std::round(s * 1000) / 1000;  // ms: enough for a timeout
  }
  json sigs = json::object();
  for (const auto& [m, s] : d.signatures) {
    json tests = json::object();
    for (const auto& [t, cases] : s.tests)
      tests[t] = json(std::vector<std::string>(cases.begin(), cases.end()));
    sigs[m] = {{"inputs", s.inputs}, {"tests", tests}};
  }
  json j = {{"about",
             "Measured by ./labctl check-tests " + d.lab + " under grading seed " + std::to_string(d.seed) +
                 ": the solution's time per graded case (per-case timeouts) and the graded cases each mutant "
                 "fails (the grader's hints). The gates check it is fresh; do not edit by hand."},
            {"lab", d.lab},
            {"inputs", d.inputs},
            {"seed", d.seed},
            {"timings", timings},
            {"signatures", sigs}};
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string InputsHash(const std::string& root, const std::string& lab, const std::string& mutant_diff) {
  std::vector<fs::path> files;
  auto add_dir = [&](const fs::path& dir, bool recursive) {
    if (!fs::is_directory(dir)) return;
    if (recursive) {
      for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        const std::string name = it->path().filename().string();
        if (it->is_directory() && name == "mutants") {
          it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file() && name != "grading.json") files.push_back(it->path());
      }
    } else {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() == ".h") files.push_back(e.path());
      }
    }
  };
  add_dir(fs::path(root) / "labs" / lab, false);
  add_dir(fs::path(root) / "solutions" / lab, true);
  add_dir(fs::path(root) / "tests" / lab, true);
  std::sort(files.begin(), files.end());
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  for (const auto& f : files) {
    const std::string rel = fs::relative(f, root).string();
    const std::string bytes = ReadBytes(f);
    XXH64_update(st, rel.data(), rel.size() + 1);
    XXH64_update(st, bytes.data(), bytes.size());
  }
  if (!mutant_diff.empty()) {
    const std::string bytes = ReadBytes(mutant_diff);
    XXH64_update(st, bytes.data(), bytes.size());
  }
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return Hex(h);
}

}  // namespace distlab::grader
