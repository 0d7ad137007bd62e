// gates: small checks labctl needs around the grader (no Python or jq on a fresh Debian 12).
//
//   gates list --binary B --manifest M     a graded binary's cases (`--gtest_list_tests`) must be exactly the
//                                           cases its manifest gives points to (only on grader-built
//                                           variants)
//   gates mutants --dir tests/<lab>/mutants  checks every mutant's preamble (bug, kind, hint) and lists them
//   gates first-case --manifest M           prints the manifest's first case (the grader self-check's target)
//   gates results --results R --expect full|zero|touched [--case C]
//                                           checks a results.json: full marks, zero, or C at 0 with every
//                                           other case at full marks
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "tools/grader/mutants.h"

namespace {

using json = nlohmann::json;
using distlab::grader::Mutant;
using distlab::grader::ReadMutants;

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

// ---------------------------------------------------------------------------------------------------- lab

struct LabOptions {
  std::string lab, bin, runner, mutants_dir, rows;
  std::vector<std::string> tests;
  int jobs = 2;
};

// Runs `argv` with stdout and stderr sent to /dev/null; returns its exit status (-1 when it did not exit).
int RunQuiet(const std::vector<std::string>& argv) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    FILE* null = std::fopen("/dev/null", "w");
    if (null != nullptr) {
      ::dup2(::fileno(null), 1);
      ::dup2(::fileno(null), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// One variant run by the grader's runner: the verdict of each case, in the manifest's order.
struct Verdicts {
  bool ok = false;                                         // the runner produced a report
  std::string error;                                       // why not
  std::vector<std::pair<std::string, std::string>> cases;  // (case, passed|failed|skipped|not_run)
};

Verdicts RunVariant(const LabOptions& o, const std::string& variant, const std::string& manifest,
                    bool fail_fast, const std::string& scratch) {
  Verdicts v;
  const std::string binary = o.bin + "/tests/" + o.lab + "/" + variant;
  if (!std::filesystem::exists(binary)) {
    v.error = binary + " was not built";
    return v;
  }
  const std::string out = scratch + "/" + variant + ".json";
  std::vector<std::string> argv = {o.runner, "--binary", binary,   "--manifest",           manifest,
                                   "--json", out,        "--jobs", std::to_string(o.jobs), "--show",
                                   "none",   "--label",  variant};
  if (fail_fast) argv.push_back("--fail-fast");
  const int rc = RunQuiet(argv);
  if (!std::filesystem::exists(out)) {
    v.error = "the runner wrote no report for " + variant + " (exit " + std::to_string(rc) + ")";
    return v;
  }
  json r = ReadJson(out);
  for (auto& c : r["cases"])
    v.cases.emplace_back(c["name"].get<std::string>(), c["status"].get<std::string>());
  v.ok = true;
  return v;
}

// The gates of one lab, on variants built beforehand (labctl builds every graded test, manifest, stub and
// mutant variant of the lab in one Bazel invocation):
//   case lists  each graded binary's cases equal the points its graded_test declares (one check per test)
//   gate 2      every graded case fails on the stubs: <test>_stub, each case alone (one check per case;
//               GPU cases that skip are not checks)
//   gate 3      every mutant fails at least one graded case: it is run, fail-fast, on each graded test that
//               grades its piece (the test named after the piece first), until one case fails (a crash or
//               a timeout is a failure too); a lab has at least 6 mutants (one check per mutant)
// Prints each finding, appends the lab's table rows to --rows (lab TAB gate TAB result), and ends with
// "N passed, N failed, N skipped". Exit status 1 when a check failed.
int Lab(const LabOptions& o) {
  int passed = 0, failed = 0, skipped = 0;
  char tmpl[] = "/tmp/distlab-gates.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string scratch = tmpl;
  std::vector<std::string> rows;
  auto manifest_of = [&](const std::string& t) {
    return o.bin + "/tests/" + o.lab + "/" + t + ".manifest.json";
  };

  int lists_ok = 0, lists_bad = 0;
  for (const auto& t : o.tests) {
    (List(o.bin + "/tests/" + o.lab + "/" + t, manifest_of(t)) == 0 ? lists_ok : lists_bad) += 1;
  }
  rows.push_back("case lists = manifests\t" + std::to_string(lists_ok) + " match, " +
                 std::to_string(lists_bad) + " mismatch");

  std::printf("[%s] gate 2: every graded case must fail on the stubs\n", o.lab.c_str());
  int g2_fail = 0, g2_pass = 0, g2_skip = 0;
  for (const auto& t : o.tests) {
    Verdicts v = RunVariant(o, t + "_stub", manifest_of(t), /*fail_fast=*/false, scratch);
    if (!v.ok) {
      std::printf("  %s\n", v.error.c_str());
      ++g2_pass;
      continue;
    }
    for (const auto& [c, status] : v.cases) {
      if (status == "failed") ++g2_fail;
      if (status == "skipped") ++g2_skip;
      if (status == "passed" || status == "not_run") {
        ++g2_pass;
        std::printf("  PASSES ON THE STUBS: %s %s\n", t.c_str(), c.c_str());
      }
    }
  }
  rows.push_back("gate 2 (stubs fail)\t" + std::to_string(g2_fail) + " cases fail, " +
                 std::to_string(g2_pass) + " pass (bad), " + std::to_string(g2_skip) + " skipped");

  const std::vector<Mutant> mutants = ReadMutants(o.mutants_dir);
  std::printf("[%s] gate 3: each of %zu mutants must fail a graded case\n", o.lab.c_str(), mutants.size());
  int killed = 0;
  std::vector<std::string> survivors;
  for (const Mutant& m : mutants) {
    // The graded tests that grade this mutant's piece: their manifests list its variant.
    std::vector<std::string> candidates;
    for (const auto& t : o.tests) {
      json man = ReadJson(manifest_of(t));
      const std::string want = "mutant:" + t + "_mutant_" + m.what;
      bool has = false;
      for (auto& v : man["variants"]) has |= v.get<std::string>() == want;
      if (!has) continue;
      if (t == m.stem + "_hidden_test") {
        candidates.insert(candidates.begin(), t);
      } else {
        candidates.push_back(t);
      }
    }
    std::string by;
    for (const auto& t : candidates) {
      Verdicts v = RunVariant(o, t + "_mutant_" + m.what, manifest_of(t), /*fail_fast=*/true, scratch);
      if (!v.ok) {
        std::printf("  %s\n", v.error.c_str());
        continue;
      }
      for (const auto& [c, status] : v.cases) {
        if (status == "failed") {
          by = c;
          break;
        }
      }
      if (!by.empty()) break;
    }
    if (!by.empty()) {
      ++killed;
      std::printf("  killed    %-40s by %s\n", m.what.c_str(), by.c_str());
    } else if (candidates.empty()) {
      survivors.push_back(m.what);
      std::printf(
          "  SURVIVED  %-40s (no graded test grades piece %s: name one <piece>_hidden_test or list it "
          "in a test's pieces)\n",
          m.what.c_str(), m.stem.c_str());
    } else {
      survivors.push_back(m.what);
      std::printf("  SURVIVED  %-40s (no graded case of the tests of piece %s fails)\n", m.what.c_str(),
                  m.stem.c_str());
    }
  }
  int too_few = 0;
  if (mutants.size() < 6) {
    std::printf("[%s] only %zu mutants (a lab has at least 6): counted as 1 failed\n", o.lab.c_str(),
                mutants.size());
    too_few = 1;
  }
  std::string surv;
  for (const auto& s : survivors) surv += (surv.empty() ? ", survivors: " : " ") + s;
  rows.push_back("gate 3 (mutants killed)\t" + std::to_string(killed) + " of " +
                 std::to_string(mutants.size()) + " killed" + surv);

  passed = lists_ok + g2_fail + killed;
  failed = lists_bad + g2_pass + static_cast<int>(survivors.size()) + too_few;
  skipped = g2_skip;
  if (!o.rows.empty()) {
    std::ofstream f(o.rows, std::ios::app);
    for (const auto& r : rows) f << o.lab << "\t" << r << "\n";
  }
  std::filesystem::remove_all(scratch);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The test-quality gates of a lab; checks around the grader: case lists, self-check results."};
  app.require_subcommand(1);
  std::string binary, manifest, results, expect, touched;
  LabOptions lo;
  auto* lab = app.add_subcommand("lab", "gates 2 and 3 and the case lists of one lab");
  lab->add_option("--lab", lo.lab, "the lab")->required();
  lab->add_option("--bin", lo.bin, "bazel-bin of the solution configuration")->required();
  lab->add_option("--runner", lo.runner, "the grader's runner binary")->required();
  lab->add_option("--mutants", lo.mutants_dir, "tests/<lab>/mutants")->required();
  lab->add_option("--test", lo.tests, "a graded test of the lab (repeatable)")->required();
  lab->add_option("--rows", lo.rows, "append the lab's table rows to this file");
  lab->add_option("--jobs", lo.jobs, "cases run at the same time");
  auto* list = app.add_subcommand("list", "a graded binary's case list must equal its manifest's points");
  list->add_option("--binary", binary, "a grader-built variant of the graded test")->required();
  list->add_option("--manifest", manifest, "its manifest")->required();
  std::string mutants_dir;
  auto* mut = app.add_subcommand("mutants", "check and list a lab's mutants: name, kind, hint");
  mut->add_option("--dir", mutants_dir, "tests/<lab>/mutants")->required();
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
    if (*lab) return Lab(lo);
    if (*list) return List(binary, manifest);
    if (*mut) {
      for (const Mutant& m : ReadMutants(mutants_dir)) {
        std::printf("%-50s %-10s %s\n", (m.stem + "__" + m.what).c_str(), m.kind.c_str(), m.hint.c_str());
      }
      return 0;
    }
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
