// mutate: writes a mutant of a solution file by applying a unified diff to it.
//
//   mutate --source solutions/L/ring.cc --diff tests/L/mutants/ring__remainder_lost.diff --out OUT.cc
//
// A mutant is stored as the small diff that makes the bug (`diff -u solution mutant`), not as a copy of the
// whole file, so that it follows the solution as the solution changes. Each hunk is located by its text, not
// by its line numbers: the hunk's old lines (context and '-' lines) must occur exactly once in the part of
// the file after the previous hunk. When they do not -- the solution changed under the mutant -- mutate fails
// and says which hunk and why, so a stale mutant breaks the build instead of silently testing something else.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Hunk {
  int header_line = 0;  // line of the "@@" header in the diff, for messages
  std::vector<std::string> old_lines, new_lines;
};

std::vector<std::string> ReadLines(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = static_cast<bool>(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int Fail(const std::string& message) {
  std::cerr << "mutate: " << message << "\n";
  return 1;
}

// True when `block` occurs in `file` at `at`.
bool MatchesAt(const std::vector<std::string>& file, size_t at, const std::vector<std::string>& block) {
  if (at + block.size() > file.size()) return false;
  for (size_t i = 0; i < block.size(); ++i) {
    if (file[at + i] != block[i]) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string source, diff, out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--source")
      source = argv[i + 1];
    else if (flag == "--diff")
      diff = argv[i + 1];
    else if (flag == "--out")
      out = argv[i + 1];
    else
      return Fail("unknown flag " + flag + " (usage: mutate --source FILE --diff DIFF --out FILE)");
  }
  if (source.empty() || diff.empty() || out.empty()) {
    return Fail("usage: mutate --source FILE --diff DIFF --out FILE");
  }
  bool ok = false;
  std::vector<std::string> file = ReadLines(source, &ok);
  if (!ok) return Fail("cannot read " + source);
  const std::vector<std::string> patch = ReadLines(diff, &ok);
  if (!ok) return Fail("cannot read " + diff);

  std::vector<Hunk> hunks;
  for (size_t i = 0; i < patch.size(); ++i) {
    const std::string& line = patch[i];
    if (line.rfind("@@", 0) == 0) {
      hunks.emplace_back();
      hunks.back().header_line = static_cast<int>(i) + 1;
    } else if (hunks.empty()) {
      continue;  // the "---"/"+++" header and any comment before the first hunk
    } else if (line.rfind("\\", 0) == 0) {
      continue;  // "\ No newline at end of file"
    } else if (!line.empty() && line[0] == '-') {
      hunks.back().old_lines.push_back(line.substr(1));
    } else if (!line.empty() && line[0] == '+') {
      hunks.back().new_lines.push_back(line.substr(1));
    } else if (line.empty() || line[0] == ' ') {
      const std::string text = line.empty() ? "" : line.substr(1);
      hunks.back().old_lines.push_back(text);
      hunks.back().new_lines.push_back(text);
    } else {
      return Fail(diff + ":" + std::to_string(i + 1) + ": not a line of a unified diff: " + line);
    }
  }
  if (hunks.empty()) return Fail(diff + ": no hunks (a mutant must change something)");

  size_t from = 0;
  for (const Hunk& h : hunks) {
    const std::string where = diff + ":" + std::to_string(h.header_line);
    if (h.old_lines == h.new_lines) return Fail(where + ": the hunk changes nothing");
    std::vector<size_t> found;
    for (size_t at = from; at + h.old_lines.size() <= file.size(); ++at) {
      if (MatchesAt(file, at, h.old_lines)) found.push_back(at);
    }
    if (found.empty()) {
      return Fail(where + ": the hunk's old lines are not in " + source +
                  " (after the previous hunk): the solution changed; remake the mutant with diff -u");
    }
    if (found.size() > 1) {
      return Fail(where + ": the hunk's old lines occur " + std::to_string(found.size()) + " times in " +
                  source + "; give the hunk more context so it names one place");
    }
    file.erase(file.begin() + static_cast<std::ptrdiff_t>(found[0]),
               file.begin() + static_cast<std::ptrdiff_t>(found[0] + h.old_lines.size()));
    file.insert(file.begin() + static_cast<std::ptrdiff_t>(found[0]), h.new_lines.begin(), h.new_lines.end());
    from = found[0] + h.new_lines.size();
  }

  std::ofstream o(out);
  for (const std::string& line : file) o << line << "\n";
  o.close();
  if (!o) return Fail("cannot write " + out);
  return 0;
}
