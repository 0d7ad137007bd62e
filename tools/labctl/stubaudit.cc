// stubaudit: does a lab's handout leave the thinking to the student? (docs/design.md §4, "The handout audit")
//
// Reads a lab's starter files (LAB.srcs of labs/<lab>/lab.bzl), its graded manifests and its hint ladder,
// and checks three things, one check each:
//
//   stubs   A TODO block is the run of `//` lines holding `TODO(<lab> stage X...)`. It is a recipe when it
//   lists
//           numbered steps ("1.", "2)", "(a)") other than the error cases after a line that says "Errors:",
//           or when it is longer than kMaxBlockLines. A hidden test "rests on" a recipe when one of its
//           pieces' starter files has a recipe block (whole files, so the count errs on the high side). The
//           lab passes when its TODO blocks hold at most kMaxNumberedLines numbered lines and at most
//           kMaxRecipeShare of its hidden points rest on recipes.
//   hints   Every stage a graded test names has labs/<lab>/hints/<X>.md, opened by "# <title>" and holding
//           "## Level 1: ..." to "## Level N: ..." in order, 2 <= N <= 3, none empty; no hint file names a
//           stage that has no graded test.
//   ids     No mutant id of the lab (tests/<lab>/mutants/<stem>__<what>.diff) appears in the files under
//           the --scan folders (labs/, notes/, reference/): a handout that names a graded mistake gives its
//           fix away.
//
// Prints a table row per finding, a summary line per check (--rows gets the gate table's rows), and last
// "<passed> passed, <failed> failed, 0 skipped".
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kMaxBlockLines = 8;         // a contract pointer, its tools and one question fit in this
constexpr int kMaxNumberedLines = 8;      // per lab: seven labs stay under the course's 60
constexpr double kMaxRecipeShare = 0.10;  // of a lab's hidden points

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) lines.push_back(l);
  return lines;
}

bool IsComment(const std::string& line) {
  const size_t p = line.find_first_not_of(" \t");
  return p != std::string::npos && line.compare(p, 2, "//") == 0;
}

// The starter files of LAB.srcs in labs/<lab>/lab.bzl: the string list after `srcs = [`.
std::vector<std::string> LabSrcs(const fs::path& lab_bzl, std::string* error) {
  const std::string text = ReadFile(lab_bzl);
  const size_t at = text.find("srcs = [");
  if (at == std::string::npos) {
    *error = lab_bzl.string() + " has no `srcs = [` in its LAB struct";
    return {};
  }
  const size_t end = text.find(']', at);
  const std::string list = text.substr(at, end - at);
  std::vector<std::string> srcs;
  static const std::regex kQuoted("\"([^\"]+)\"");
  for (std::sregex_iterator it(list.begin(), list.end(), kQuoted), e; it != e; ++it) srcs.push_back((*it)[1]);
  return srcs;
}

struct Block {
  std::string file, function;
  int line = 0, lines = 0, numbered = 0;
  bool recipe() const { return numbered > 0 || lines > kMaxBlockLines; }
};

// Every TODO block of one starter file.
std::vector<Block> TodoBlocks(const std::string& lab, const std::string& file, const std::string& text) {
  const std::vector<std::string> lines = Lines(text);
  const std::regex todo("TODO\\(" + lab +
                        " stage [A-Z][^)]*\\):? *([A-Za-z_:~]*)");  // "stage B, stretch" too
  static const std::regex kNumbered(R"(^\s*//\s*([0-9]+[.)]|\([a-z0-9]\))\s)");
  static const std::regex kErrors(R"(\bErrors?:)");
  std::vector<Block> blocks;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!IsComment(lines[i]) || !std::regex_search(lines[i], m, todo)) continue;
    size_t first = i, last = i;
    while (first > 0 && IsComment(lines[first - 1])) --first;
    while (last + 1 < lines.size() && IsComment(lines[last + 1])) ++last;
    if (first == 0) {  // the file's opening block speaks of the stubs; it is not one
      i = last;
      continue;
    }
    Block b{file, m[1], static_cast<int>(i + 1), static_cast<int>(last - first + 1), 0};
    bool errors = false;
    for (size_t k = first; k <= last; ++k) {
      if (std::regex_search(lines[k], kErrors)) errors = true;
      if (!errors && std::regex_search(lines[k], kNumbered)) ++b.numbered;
    }
    blocks.push_back(b);
    i = last;
  }
  return blocks;
}

struct Result {
  int passed = 0, failed = 0;
  std::vector<std::string> rows;  // "<lab>\t<check>\t<result>"
};

void Check(Result& r, const std::string& lab, const std::string& name, bool ok, const std::string& what) {
  (ok ? r.passed : r.failed)++;
  r.rows.push_back(lab + "\t" + name + "\t" + what + (ok ? "" : ": FAILED"));
}

void AuditStubs(const fs::path& root, const std::string& lab, const std::vector<std::string>& manifests,
                Result& r) {
  std::string error;
  const std::vector<std::string> srcs = LabSrcs(root / "labs" / lab / "lab.bzl", &error);
  if (!error.empty()) {
    Check(r, lab, "stubs", false, error);
    return;
  }
  int numbered = 0, recipes = 0, total_blocks = 0;
  std::set<std::string> recipe_stems;
  for (const std::string& src : srcs) {
    const std::vector<Block> blocks = TodoBlocks(lab, src, ReadFile(root / "labs" / lab / src));
    for (const Block& b : blocks) {
      ++total_blocks;
      numbered += b.numbered;
      if (!b.recipe()) continue;
      ++recipes;
      recipe_stems.insert(src.substr(0, src.rfind('.')));
      std::printf("[%s] recipe stub: labs/%s/%s:%d %s (%d lines, %d numbered)\n", lab.c_str(), lab.c_str(),
                  src.c_str(), b.line, b.function.c_str(), b.lines, b.numbered);
    }
  }
  int points = 0, recipe_points = 0;
  for (const std::string& path : manifests) {
    json m;
    try {
      m = json::parse(ReadFile(path));
    } catch (const json::exception& e) {
      Check(r, lab, "stubs", false, "cannot read the manifest " + path + ": " + e.what());
      return;
    }
    int test_points = 0;
    for (const auto& [c, p] : m.at("cases").items()) test_points += p.get<int>();
    points += test_points;
    for (const auto& piece : m.at("pieces")) {
      if (recipe_stems.count(piece.get<std::string>())) {
        recipe_points += test_points;
        break;
      }
    }
  }
  const double share = points ? static_cast<double>(recipe_points) / points : 0;
  char what[256];
  std::snprintf(what, sizeof what,
                "%d numbered lines in %d TODO blocks (at most %d); %d recipes; %d of %d hidden points on "
                "them (%.0f %%, at most %.0f %%)",
                numbered, total_blocks, kMaxNumberedLines, recipes, recipe_points, points, 100 * share,
                100 * kMaxRecipeShare);
  Check(r, lab, "stubs", numbered <= kMaxNumberedLines && share <= kMaxRecipeShare, what);
}

void AuditHints(const fs::path& root, const std::string& lab, const std::vector<std::string>& manifests,
                Result& r) {
  std::set<std::string> stages;
  for (const std::string& path : manifests) stages.insert(json::parse(ReadFile(path)).at("stage"));
  const fs::path dir = root / "labs" / lab / "hints";
  std::vector<std::string> problems;
  std::string levels;
  static const std::regex kLevel(R"(^## Level ([0-9]+): \S)");
  for (const std::string& stage : stages) {
    const fs::path f = dir / (stage + ".md");
    if (!fs::exists(f)) {
      problems.push_back("stage " + stage + " has no " + f.lexically_relative(root).string());
      continue;
    }
    const std::vector<std::string> lines = Lines(ReadFile(f));
    if (lines.empty() || lines[0].rfind("# ", 0) != 0) {
      problems.push_back(f.filename().string() + " does not open with a '# <title>' line");
    }
    int n = 0, body = 0;
    bool empty_level = false;
    for (const std::string& l : lines) {
      std::smatch m;
      if (std::regex_search(l, m, kLevel)) {
        if (n > 0 && body == 0) empty_level = true;
        if (std::stoi(m[1]) != n + 1) {
          problems.push_back(f.filename().string() + ": level " + std::string(m[1]) + " where level " +
                             std::to_string(n + 1) + " was due");
        }
        ++n, body = 0;
      } else if (n > 0 && l.find_first_not_of(" \t") != std::string::npos) {
        ++body;
      }
    }
    if (n > 0 && body == 0) empty_level = true;
    if (n < 2 || n > 3) {
      problems.push_back(f.filename().string() + " has " + std::to_string(n) + " levels (2 or 3)");
    }
    if (empty_level) problems.push_back(f.filename().string() + " has an empty level");
    levels += (levels.empty() ? "" : ", ") + stage + " " + std::to_string(n);
  }
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string stage = e.path().stem().string();
      if (!stages.count(stage)) {
        problems.push_back(e.path().filename().string() + " is not a stage of a graded test");
      }
    }
  }
  for (const std::string& p : problems) std::printf("[%s] hints: %s\n", lab.c_str(), p.c_str());
  std::string all;
  for (const std::string& s : stages) all += (all.empty() ? "" : " ") + s;
  Check(r, lab, "hint ladder", problems.empty() && !stages.empty(),
        "graded stages " + (all.empty() ? std::string("none") : all) +
            "; levels per hint file: " + (levels.empty() ? std::string("none") : levels));
}

void AuditIds(const fs::path& root, const std::string& lab, const std::vector<std::string>& scan, Result& r) {
  std::vector<std::string> ids;
  const fs::path dir = root / "tests" / lab / "mutants";
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".diff") ids.push_back(e.path().stem().string());
    }
  }
  int found = 0;
  for (const std::string& s : scan) {
    if (!fs::is_directory(root / s)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / s)) {
      if (!e.is_regular_file()) continue;
      const std::string text = ReadFile(e.path());
      for (const std::string& id : ids) {
        if (text.find(id) == std::string::npos) continue;
        ++found;
        std::printf("[%s] mutant id %s appears in %s\n", lab.c_str(), id.c_str(),
                    e.path().lexically_relative(root).c_str());
      }
    }
  }
  std::string where;
  for (const std::string& s : scan) where += (where.empty() ? "" : ", ") + s + "/";
  Check(r, lab, "mutant ids", found == 0,
        std::to_string(ids.size()) + " ids, " + std::to_string(found) + " found in " + where);
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{
      "Audits a lab's handout: recipe stubs, the hint ladder, mutant ids (docs/design.md §4)"};
  std::string root = ".", lab, rows;
  std::vector<std::string> manifests, scan = {"labs", "notes", "reference"};
  app.add_option("--root", root, "the course checkout");
  app.add_option("--lab", lab, "the lab")->required();
  app.add_option("--manifest", manifests, "a graded test's manifest (<test>.manifest.json), repeated");
  app.add_option("--scan", scan, "folders that must not name a mutant (default: labs notes reference)");
  app.add_option("--rows", rows, "append the gate table's rows (lab, check, result) to this file");
  DISTLAB_CLI_PARSE(app, argc, argv);
  Result r;
  try {
    AuditStubs(root, lab, manifests, r);
    AuditHints(root, lab, manifests, r);
    AuditIds(root, lab, scan, r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stubaudit: %s\n", e.what());
    return 2;
  }
  if (!rows.empty()) {
    std::ofstream out(rows, std::ios::app);
    for (const std::string& row : r.rows) out << row << "\n";
  }
  for (const std::string& row : r.rows) std::printf("%s\n", row.c_str());
  std::printf("%d passed, %d failed, 0 skipped\n", r.passed, r.failed);
  return r.failed ? 1 : 0;
}
