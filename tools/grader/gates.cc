// gates: small checks labctl needs around the grader (no Python or jq on a fresh Debian 12).
//
//   gates lab --lab L --bin B --runner R --mutants D --test T... --public P...
//                                           the case lists and gates 2, 3 and 4 of one lab (see Lab below)
//   gates list --binary B --manifest M     a graded binary's cases (`--gtest_list_tests`) must be exactly the
//                                           cases its manifest gives points to (only on grader-built
//                                           variants)
//   gates mutants --dir tests/<lab>/mutants [--kind logic|convention] [--what]
//                                           checks every mutant's preamble (bug, kind, hint) and lists them
//                                           (only those of a kind; only their <what>: labctl's gate 4 list)
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

// The cases of a GoogleTest binary (`--gtest_list_tests`); false when the binary could not list them.
bool ListCases(const std::string& binary, std::set<std::string>* cases) {
  std::string cmd = "'" + binary + "' --gtest_list_tests 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int st = ::pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return false;
  *cases = ParseList(text);
  return true;
}

int List(const std::string& binary, const std::string& manifest) {
  json m = ReadJson(manifest);
  std::set<std::string> declared;
  for (auto& [c, p] : m["cases"].items()) declared.insert(c);
  std::set<std::string> listed;
  if (!ListCases(binary, &listed)) {
    std::printf("  %s --gtest_list_tests failed\n", binary.c_str());
    return 1;
  }
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
  std::vector<std::string> tests;  // graded tests (tests/<lab>/<t>, with <t>.manifest.json)
  std::vector<std::string>
      publics;  // public tests (labs/<lab>/<p>), with tests/<lab>/<p>.public_manifest.json
  int jobs = 2;
  double public_timeout_s = 60;  // per case, for the public variants (gate 4)
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

// `manifest` gives the expected cases (a graded test's); when empty, the binary's own case list does, with
// the public timeout (a public test's variant).
Verdicts RunVariant(const LabOptions& o, const std::string& variant, const std::string& manifest,
                    bool fail_fast, const std::string& scratch) {
  Verdicts v;
  const std::string binary = o.bin + "/tests/" + o.lab + "/" + variant;
  if (!std::filesystem::exists(binary)) {
    v.error = binary + " was not built";
    return v;
  }
  const std::string out = scratch + "/" + variant + ".json";
  std::vector<std::string> argv = {
      o.runner, "--binary", binary,    "--json", out, "--jobs", std::to_string(o.jobs),
      "--show", "none",     "--label", variant};
  if (!manifest.empty()) {
    argv.insert(argv.end(), {"--manifest", manifest});
  } else {
    std::set<std::string> cases;
    if (!ListCases(binary, &cases) || cases.empty()) {
      v.error = binary + " --gtest_list_tests listed no cases";
      return v;
    }
    for (const auto& c : cases) argv.insert(argv.end(), {"--case", c});
    argv.insert(argv.end(), {"--timeout", std::to_string(o.public_timeout_s)});
  }
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

// The tests among `tests` whose manifest lists a variant of mutant `m` (`<test>_mutant_<what>`), the one
// named after its piece (`<stem><suffix>`) first.
template <typename ManifestOf>
std::vector<std::string> TestsOfPiece(const std::vector<std::string>& tests, const ManifestOf& manifest_of,
                                      const Mutant& m, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& t : tests) {
    json man = ReadJson(manifest_of(t));
    const std::string want = "mutant:" + t + "_mutant_" + m.what;
    bool has = false;
    for (auto& v : man["variants"]) has |= v.get<std::string>() == want;
    if (!has) continue;
    if (t == m.stem + suffix) {
      out.insert(out.begin(), t);
    } else {
      out.push_back(t);
    }
  }
  return out;
}

// Runs mutant `m` on each test of `candidates` in turn (fail-fast) and returns the first case that fails (""
// if none does). Graded tests run the cases of their manifest; public tests the cases their binary lists.
template <typename ManifestOf>
std::string FirstFailingCase(const LabOptions& o, const Mutant& m, const std::vector<std::string>& candidates,
                             const ManifestOf& manifest_of, bool public_tests, const std::string& scratch) {
  for (const auto& t : candidates) {
    Verdicts v = RunVariant(o, t + "_mutant_" + m.what, public_tests ? "" : manifest_of(t),
                            /*fail_fast=*/true, scratch);
    if (!v.ok) {
      std::printf("  %s\n", v.error.c_str());
      continue;
    }
    for (const auto& [c, status] : v.cases) {
      if (status == "failed") return (public_tests ? t + " " : "") + c;
    }
  }
  return "";
}

// The gates of one lab, on variants built beforehand (labctl builds every graded test, manifest, stub and
// mutant variant of the lab in one Bazel invocation):
//   case lists  each graded binary's cases equal the points its graded_test declares (one check per test)
//   gate 2      every graded case fails on the stubs: <test>_stub, each case alone (one check per case;
//               GPU cases that skip are not checks)
//   gate 3      every mutant fails at least one graded case: it is run, fail-fast, on each graded test that
//               grades its piece (the test named after the piece first), until one case fails (a crash or
//               a timeout is a failure too); a lab has at least 6 mutants (one check per mutant)
//   gate 4      every mutant of kind convention fails at least one PUBLIC case: it is run, fail-fast, on the
//               public tests that exercise its piece (LAB.public_tests; the variants <public>_mutant_<m> are
//               built in tests/<lab>, their cases are what the binary lists) (one check per convention
//               mutant)
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
    const std::vector<std::string> candidates = TestsOfPiece(o.tests, manifest_of, m, "_hidden_test");
    const std::string by = FirstFailingCase(o, m, candidates, manifest_of, /*public_tests=*/false, scratch);
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

  // Gate 4: a convention mutant breaks a rule the handout states, so a public test must catch it.
  auto public_manifest_of = [&](const std::string& p) {
    return o.bin + "/tests/" + o.lab + "/" + p + ".public_manifest.json";
  };
  int conventions = 0, caught = 0;
  std::vector<std::string> uncaught;
  for (const Mutant& m : mutants) conventions += m.kind == "convention";
  std::printf("[%s] gate 4: each of %d convention mutants must fail a public test\n", o.lab.c_str(),
              conventions);
  for (const Mutant& m : mutants) {
    if (m.kind != "convention") continue;
    const std::vector<std::string> candidates = TestsOfPiece(o.publics, public_manifest_of, m, "_test");
    const std::string by =
        FirstFailingCase(o, m, candidates, public_manifest_of, /*public_tests=*/true, scratch);
    if (!by.empty()) {
      ++caught;
      std::printf("  caught    %-40s by %s\n", m.what.c_str(), by.c_str());
    } else {
      uncaught.push_back(m.what);
      if (candidates.empty()) {
        std::printf("  UNCAUGHT  %-40s (no public test exercises piece %s: list it in LAB.public_tests)\n",
                    m.what.c_str(), m.stem.c_str());
      } else {
        std::printf(
            "  UNCAUGHT  %-40s (every public test of piece %s passes: state the convention in the header or "
            "note and add a public case that checks it)\n",
            m.what.c_str(), m.stem.c_str());
      }
    }
  }
  std::string unc;
  for (const auto& s : uncaught) unc += (unc.empty() ? ", uncaught: " : " ") + s;
  rows.push_back("gate 4 (public catches)\t" + std::to_string(caught) + " of " + std::to_string(conventions) +
                 " convention mutants fail a public test" + unc);

  passed = lists_ok + g2_fail + killed + caught;
  failed =
      lists_bad + g2_pass + static_cast<int>(survivors.size()) + too_few + static_cast<int>(uncaught.size());
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
  auto* lab = app.add_subcommand("lab", "gates 2, 3 and 4 and the case lists of one lab");
  lab->add_option("--lab", lo.lab, "the lab")->required();
  lab->add_option("--bin", lo.bin, "bazel-bin of the solution configuration")->required();
  lab->add_option("--runner", lo.runner, "the grader's runner binary")->required();
  lab->add_option("--mutants", lo.mutants_dir, "tests/<lab>/mutants")->required();
  lab->add_option("--test", lo.tests, "a graded test of the lab (repeatable)")->required();
  lab->add_option("--public", lo.publics, "a public test of the lab (repeatable): gate 4");
  lab->add_option("--public-timeout", lo.public_timeout_s, "per-case timeout of the public variants (s)");
  lab->add_option("--rows", lo.rows, "append the lab's table rows to this file");
  lab->add_option("--jobs", lo.jobs, "cases run at the same time");
  auto* list = app.add_subcommand("list", "a graded binary's case list must equal its manifest's points");
  list->add_option("--binary", binary, "a grader-built variant of the graded test")->required();
  list->add_option("--manifest", manifest, "its manifest")->required();
  std::string mutants_dir, kind;
  bool what_only = false;
  auto* mut = app.add_subcommand("mutants", "check and list a lab's mutants: name, kind, hint");
  mut->add_option("--dir", mutants_dir, "tests/<lab>/mutants")->required();
  mut->add_option("--kind", kind, "only the mutants of this kind")
      ->check(CLI::IsMember({"logic", "convention"}));
  mut->add_flag("--what", what_only, "print only each mutant's <what> (its variants' suffix), one a line");
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
        if (!kind.empty() && m.kind != kind) continue;
        if (what_only) {
          std::printf("%s\n", m.what.c_str());
        } else {
          std::printf("%-50s %-10s %s\n", (m.stem + "__" + m.what).c_str(), m.kind.c_str(), m.hint.c_str());
        }
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
