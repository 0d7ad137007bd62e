// deps: checks the dependency rule between the repository's top-level folders (tools/deps/rule.h,
// docs/design.md §1) and prints every edge that breaks it, naming the file and line or the target.
//
//   deps [--graph GRAPH] FILE...
//     FILE...  C++ files of the repository (paths relative to its root): their #include "..." lines
//     GRAPH    the output of `bazel query 'deps(//...)' --output=graph --nograph:factored`
//
// Also the first line of each lab header and starter file (rule.h: CheckFirstLine), part of the file's check.
// One check per file and one per target that has dependencies in the graph. The last line is
// "<passed> passed, <failed> failed, 0 skipped"; exit status 1 when anything failed.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tools/base/cli.h"
#include "tools/deps/rule.h"

namespace {

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"the dependency rule between top-level folders (docs/design.md §1)"};
  std::string graph;
  std::vector<std::string> files;
  app.add_option("--graph", graph, "bazel query 'deps(//...)' --output=graph --nograph:factored");
  app.add_option("files", files, "C++ files, relative to the repository root");
  DISTLAB_CLI_PARSE(app, argc, argv);

  int passed = 0, failed = 0;
  for (const std::string& f : files) {
    std::string text;
    if (!ReadFile(f, &text)) {
      std::printf("%s: cannot read\n", f.c_str());
      ++failed;
      continue;
    }
    std::vector<distlab::deps::Violation> bad = distlab::deps::CheckIncludes(f, text);
    if (auto v = distlab::deps::CheckFirstLine(f, text)) bad.push_back(*v);
    for (const auto& v : bad) std::printf("%s: %s\n", v.where.c_str(), v.edge.c_str());
    bad.empty() ? ++passed : ++failed;
  }
  if (!graph.empty()) {
    std::string text;
    if (!ReadFile(graph, &text)) {
      std::printf("%s: cannot read the query graph\n", graph.c_str());
      ++failed;
    } else {
      std::map<std::string, int> targets;  // a target of the repository -> edges that break the rule
      for (const auto& [from, to] : distlab::deps::ParseGraph(text)) {
        if (from.rfind("//", 0) != 0) continue;
        int& n = targets[from];
        if (auto v = distlab::deps::CheckEdge(from, to)) {
          std::printf("%s: %s\n", v->where.c_str(), v->edge.c_str());
          ++n;
        }
      }
      for (const auto& [target, n] : targets) n == 0 ? ++passed : ++failed;
    }
  }
  std::printf("%d passed, %d failed, 0 skipped\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
