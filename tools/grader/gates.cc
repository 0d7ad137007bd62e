// gates: small checks labctl needs around the grader (no Python or jq on a fresh Debian 12).
//
//   gates list --binary B --manifest M     a graded binary's cases (`--gtest_list_tests`) must be exactly the
//                                           cases its manifest gives points to (only on grader-built
//                                           variants)
//   gates first-case --manifest M           prints the manifest's first case (the grader self-check's target)
//   gates results --results R --expect full|zero|touched [--case C]
//                                           checks a results.json: full marks, zero, or C at 0 with every
//                                           other case at full marks
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"

namespace {

using json = nlohmann::json;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

json ReadJson(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  return json::parse(f);
}

// GoogleTest prints "Suite.\n  Case\n" with optional "  # GetParam() = ..." / "  # TypeParam = ..." comments.
std::set<std::string> ParseList(const std::string& text) {
  std::set<std::string> out;
  std::string suite;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::string body = line;
    size_t hash = body.find("  #");
    if (hash != std::string::npos) body = body.substr(0, hash);
    if (body[0] != ' ') {
      suite = Trim(body);
    } else if (!suite.empty()) {
      out.insert(suite + Trim(body));
    }
  }
  return out;
}

int List(const std::string& binary, const std::string& manifest) {
  json m = ReadJson(manifest);
  std::set<std::string> declared;
  for (auto& [c, p] : m["cases"].items()) declared.insert(c);
  std::string cmd = "'" + binary + "' --gtest_list_tests 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + binary);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int st = ::pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::printf("  %s --gtest_list_tests failed\n", binary.c_str());
    return 1;
  }
  std::set<std::string> listed = ParseList(text);
  std::string target = m["target"].get<std::string>();
  int bad = 0;
  for (auto& c : listed) {
    if (!declared.count(c)) {
      std::printf("  %s: case %s has no points in its graded_test\n", target.c_str(), c.c_str());
      ++bad;
    }
  }
  for (auto& c : declared) {
    if (!listed.count(c)) {
      std::printf("  %s: points declared for %s, which is not a case of the binary\n", target.c_str(),
                  c.c_str());
      ++bad;
    }
  }
  std::printf("  %s: %zu cases listed, %zu declared%s\n", target.c_str(), listed.size(), declared.size(),
              bad ? ", MISMATCH" : ", match");
  return bad == 0 ? 0 : 1;
}

int Results(const std::string& path, const std::string& expect, const std::string& touched) {
  json r = ReadJson(path);
  double score = r["score"].get<double>(), max = r["max_score"].get<double>();
  int bad = 0;
  std::string detail;
  for (auto& t : r["tests"]) {
    std::string name = t["name"].get<std::string>();
    std::string cs = name.substr(0, name.find(' '));
    double s = t["score"].get<double>(), m = t["max_score"].get<double>();
    bool want_full = expect == "full" || (expect == "touched" && cs != touched);
    if (want_full && s != m) {
      ++bad;
      detail += "    expected full marks: " + name + "\n";
    }
    if (!want_full && s != 0) {
      ++bad;
      detail += "    expected 0: " + name + "\n";
    }
  }
  if (expect == "touched") {
    bool found = false;
    for (auto& t : r["tests"]) found |= t["name"].get<std::string>().rfind(touched + " ", 0) == 0;
    if (!found) {
      ++bad;
      detail += "    the touched case " + touched + " is not in the results\n";
    }
  }
  if (r["tests"].empty()) {
    ++bad;
    detail += "    no graded cases in the results\n";
  }
  std::printf("score %g / %g%s\n%s", score, max, bad ? " (UNEXPECTED)" : "", detail.c_str());
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Checks around the grader: case lists, self-check results."};
  app.require_subcommand(1);
  std::string binary, manifest, results, expect, touched;
  auto* list = app.add_subcommand("list", "a graded binary's case list must equal its manifest's points");
  list->add_option("--binary", binary, "a grader-built variant of the graded test")->required();
  list->add_option("--manifest", manifest, "its manifest")->required();
  auto* first = app.add_subcommand("first-case", "print the manifest's first case");
  first->add_option("--manifest", manifest, "the manifest")->required();
  auto* res = app.add_subcommand("results", "check a results.json against what the self-check expects");
  res->add_option("--results", results, "results.json")->required();
  res->add_option("--expect", expect, "full | zero | touched")
      ->required()
      ->check(CLI::IsMember({"full", "zero", "touched"}));
  res->add_option("--case", touched, "the case a cheat touched (for --expect touched)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*list) return List(binary, manifest);
    if (*first) {
      json m = ReadJson(manifest);
      if (m["cases"].empty()) throw std::runtime_error("no cases in " + manifest);
      std::printf("%s\n", m["cases"].begin().key().c_str());
      return 0;
    }
    if (*res) return Results(results, expect, touched);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gates: %s\n", e.what());
    return 2;
  }
  return 2;
}
