// compdb: writes compile_commands.json from `bazel aquery --output=jsonproto 'mnemonic("CppCompile", ...)'`,
// so clang-tidy (labctl lint) sees the flags Bazel really uses.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"

int main(int argc, char** argv) {
  std::string aquery, out, execroot;
  distlab::cli::App app{"Bazel aquery (jsonproto) -> compile_commands.json"};
  app.add_option("--aquery", aquery, "the aquery output")->required();
  app.add_option("--execroot", execroot, "bazel info execution_root")->required();
  app.add_option("--out", out, "compile_commands.json to write")->required();
  DISTLAB_CLI_PARSE(app, argc, argv);
  std::ifstream in(aquery);
  if (!in) {
    std::fprintf(stderr, "compdb: cannot read %s\n", aquery.c_str());
    return 2;
  }
  nlohmann::json a = nlohmann::json::parse(in);
  nlohmann::json db = nlohmann::json::array();
  std::set<std::string> seen;
  for (auto& action : a.value("actions", nlohmann::json::array())) {
    std::vector<std::string> args = action.value("arguments", std::vector<std::string>{});
    std::string file;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "-c") file = args[i + 1];
    }
    // Only the repository's own sources, once each (the first configuration wins).
    if (file.empty() || file.rfind("external/", 0) == 0 || file.rfind("bazel-out/", 0) == 0) continue;
    if (!seen.insert(file).second) continue;
    // What only GCC understands goes: the forced include of a precompiled header (third_party/pch; clang
    // cannot read GCC's format, and every file includes what it uses itself) and GCC-only options.
    for (size_t i = 0; i < args.size();) {
      if (args[i] == "-include" && i + 1 < args.size() && args[i + 1].rfind("third_party/pch/", 0) == 0) {
        args.erase(args.begin() + i, args.begin() + i + 2);
      } else if (args[i] == "-fno-canonical-system-headers" || args[i].rfind("-fvect-cost-model=", 0) == 0) {
        args.erase(args.begin() + i);
      } else {
        ++i;
      }
    }
    db.push_back({{"directory", execroot}, {"file", file}, {"arguments", args}});
  }
  std::ofstream f(out);
  f << db.dump(1) << "\n";
  std::printf("compdb: %zu files\n", db.size());
  return f ? 0 : 1;
}
