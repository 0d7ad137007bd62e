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

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The preamble ends where the diff begins.
bool DiffStarts(const std::string& line) {
  return StartsWith(line, "--- ") || StartsWith(line, "diff ") || StartsWith(line, "@@");
}

}  // namespace

Mutant ReadMutant(const std::string& path, std::vector<std::string>* problems) {
  Mutant m;
  m.path = path;
  const std::string name = std::filesystem::path(path).filename().string();
  const std::string base = name.size() > 5 ? name.substr(0, name.size() - 5) : name;
  const size_t sep = base.find("__");
  if (sep == std::string::npos || sep == 0 || sep + 2 == base.size()) {
    problems->push_back(path + ": a mutant is named <solution stem>__<mistake>.diff");
  } else {
    m.stem = base.substr(0, sep);
    m.what = base.substr(sep + 2);
  }
  std::ifstream in(path);
  if (!in) {
    problems->push_back(path + ": cannot read it");
    return m;
  }
  bool seen_bug = false, seen_kind = false, seen_hint = false, diff = false;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (DiffStarts(line)) {
      diff = true;
      break;
    }
    if (Trim(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    const size_t colon = line.find(':');
    const std::string key = colon == std::string::npos ? "" : Trim(line.substr(0, colon));
    const std::string value = colon == std::string::npos ? "" : Trim(line.substr(colon + 1));
    std::string* field = nullptr;
    bool* seen = nullptr;
    if (key == "bug") field = &m.bug, seen = &seen_bug;
    if (key == "kind") field = &m.kind, seen = &seen_kind;
    if (key == "hint") field = &m.hint, seen = &seen_hint;
    if (field == nullptr) {
      problems->push_back(where +
                          "a mutant's preamble holds only 'bug:', 'kind:' and 'hint:' lines, not: " + line);
      continue;
    }
    if (*seen) problems->push_back(where + "'" + key + ":' given twice");
    if (value.empty()) problems->push_back(where + "'" + key + ":' is empty");
    *seen = true;
    *field = value;
  }
  if (!diff) problems->push_back(path + ": no diff after the preamble (no '--- ' line)");
  for (auto [key, seen] : {std::pair{"bug", seen_bug}, {"kind", seen_kind}, {"hint", seen_hint}}) {
    if (!seen)
      problems->push_back(path + ": no '" + key +
                          ":' line in the preamble (every mutant has bug, kind, hint)");
  }
  if (seen_kind && m.kind != "logic" && m.kind != "convention") {
    problems->push_back(path + ": kind must be logic or convention, not '" + m.kind + "'");
  }
  if (m.hint.size() > kMaxHintLength) {
    problems->push_back(path + ": the hint has " + std::to_string(m.hint.size()) + " characters; at most " +
                        std::to_string(kMaxHintLength) + " (one line a student reads)");
  }
  return m;
}

std::vector<Mutant> ReadMutants(const std::string& dir) {
  std::vector<Mutant> out;
  if (!std::filesystem::is_directory(dir)) return out;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".diff") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> problems;
  for (const auto& p : paths) out.push_back(ReadMutant(p, &problems));
  if (!problems.empty()) {
    std::string text = std::to_string(problems.size()) + " problem(s) in the mutants of " + dir + ":";
    for (const auto& p : problems) text += "\n  " + p;
    throw std::runtime_error(text);
  }
  return out;
}

}  // namespace distlab::grader
