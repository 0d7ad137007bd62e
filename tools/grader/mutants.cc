// Reads the mutant files of a lab and their preambles (see mutants.h).
#include "tools/grader/mutants.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace distlab::grader {

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

void ReadPreamble(Mutant* m) {
  std::ifstream in(m->path);
  if (!in) throw std::runtime_error("cannot read " + m->path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.rfind("--- ", 0) == 0 || line.rfind("@@", 0) == 0) return;  // the diff starts
    if (Trim(line).empty()) continue;
    const size_t colon = line.find(':');
    const std::string key = colon == std::string::npos ? "" : Trim(line.substr(0, colon));
    const std::string value = colon == std::string::npos ? "" : Trim(line.substr(colon + 1));
    std::string* field = key == "bug"    ? &m->bug
                         : key == "kind" ? &m->kind
                         : key == "hint" ? &m->hint
                                         : nullptr;
    if (field == nullptr) {
      throw std::runtime_error(
          m->path + ":" + std::to_string(n) +
          ": a mutant's preamble holds only 'bug:', 'kind:' and 'hint:' lines, not: " + line);
    }
    *field = value;
  }
}

}  // namespace

std::vector<Mutant> ReadMutants(const std::string& dir) {
  std::vector<Mutant> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".diff") continue;
    const std::string base = name.substr(0, name.size() - 5);
    const size_t sep = base.find("__");
    if (sep == std::string::npos || sep == 0 || sep + 2 == base.size()) {
      throw std::runtime_error(e.path().string() + ": a mutant is named <solution stem>__<mistake>.diff");
    }
    Mutant m;
    m.stem = base.substr(0, sep);
    m.what = base.substr(sep + 2);
    m.path = e.path().string();
    ReadPreamble(&m);
    if (!m.kind.empty() && m.kind != "logic" && m.kind != "convention") {
      throw std::runtime_error(m.path + ": kind must be logic or convention, not " + m.kind);
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const Mutant& a, const Mutant& b) { return a.path < b.path; });
  return out;
}

}  // namespace distlab::grader
