// gates: small checks labctl needs around the grader (no Python or jq on a fresh Debian 12).
//
//   gates lab --lab L --bin B --runner R --mutants D --test T... --public P...
//             [--seed S]... [--hint-stability]
//                                           the case lists and gates 2, 3 and 4 of one lab under each seed,
//                                           and how stable the hints are under each (see Lab below)
//   gates fairness --lab L --bin B --runner R --test T... --seed S... [--jobs N]
//                                           the solution's graded cases under many seeds: every failure, each
//                                           case's largest time against its timeout (see FairnessCheck)
//   gates seeds [--seed S]... [--count N]   the seeds of a check: the given ones (else 1), then fresh ones
//   gates list --binary B --manifest M     a graded binary's cases (`--gtest_list_tests`) must be exactly the
//                                           cases its manifest gives points to (only on grader-built
//                                           variants)
//   gates mutants --dir tests/<lab>/mutants [--kind logic|convention] [--what]
//                                           checks every mutant's preamble (bug, kind, hint) and lists them
//                                           (only those of a kind; only their <what>: labctl's gate 4 list)
//   gates refresh --lab L ... --grading tests/<lab>/grading.json [--all]
//                                           remeasures the solution's time per case and the mutants'
//                                           signatures
//   gates first-hint --results R            prints the first hint a results.json gives (nothing when none)
//   gates first-case --manifest M           prints the manifest's first case (the grader self-check's target)
//   gates cases --manifest M                prints the manifest's cases, one per line
//   gates results --results R --expect full|zero|touched [--case C]... [--reason C=TEXT]...
//                 [--output-contains TEXT]...
//                                           checks a results.json: full marks, zero, or the touched cases at
//                                           0 with every other case at full marks; and what the failures and
//                                           the overall output say
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"
#include "tools/grader/grading_data.h"
#include "tools/grader/hints.h"
#include "tools/grader/multiseed.h"
#include "tools/grader/mutants.h"
#include "tools/grader/seed.h"

namespace {

using json = nlohmann::json;
using distlab::grader::Mutant;
using distlab::grader::ReadMutants;
using namespace distlab::grader;

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

struct ResultsCheck {
  std::string path, expect;
  std::vector<std::string> touched;  // cases a cheat touched (expect touched): 0, the rest full marks
  std::vector<std::string> reasons;  // CASE=TEXT: that case's output contains TEXT (CASE * = any case)
  std::vector<std::string> output_contains;  // the overall output contains each
};

int Results(const ResultsCheck& c) {
  json r = ReadJson(c.path);
  double score = r["score"].get<double>(), max = r["max_score"].get<double>();
  int bad = 0;
  std::string detail;
  auto case_of = [](const json& t) {
    std::string name = t["name"].get<std::string>();
    return name.substr(0, name.find(' '));
  };
  for (auto& t : r["tests"]) {
    const std::string cs = case_of(t);
    double s = t["score"].get<double>(), m = t["max_score"].get<double>();
    const bool is_touched = std::find(c.touched.begin(), c.touched.end(), cs) != c.touched.end();
    bool want_full = c.expect == "full" || (c.expect == "touched" && !is_touched);
    if (want_full && s != m) {
      ++bad;
      detail += "    expected full marks: " + cs + "\n";
    }
    if (!want_full && s != 0) {
      ++bad;
      detail += "    expected 0: " + cs + "\n";
    }
  }
  for (const auto& t : c.touched) {
    bool found = false;
    for (auto& x : r["tests"]) found |= case_of(x) == t;
    if (!found) {
      ++bad;
      detail += "    the touched case " + t + " is not in the results\n";
    }
  }
  for (const auto& rc : c.reasons) {
    const size_t eq = rc.find('=');
    const std::string cs = rc.substr(0, eq), text = eq == std::string::npos ? "" : rc.substr(eq + 1);
    bool found = false;
    for (auto& x : r["tests"]) {
      if ((cs == "*" || case_of(x) == cs) && x["output"].get<std::string>().find(text) != std::string::npos) {
        found = true;
      }
    }
    if (!found) {
      ++bad;
      detail += "    no failure of " + cs + " says \"" + text + "\"\n";
    }
  }
  for (const auto& text : c.output_contains) {
    if (r["output"].get<std::string>().find(text) == std::string::npos) {
      ++bad;
      detail += "    the output does not say \"" + text + "\"\n";
    }
  }
  if (r["tests"].empty()) {
    ++bad;
    detail += "    no graded cases in the results\n";
  }
  std::printf("score %g / %g%s\n%s", score, max, bad ? " (UNEXPECTED)" : "", detail.c_str());
  return bad == 0 ? 0 : 1;
}

struct LabOptions {
  std::string lab, bin, runner, mutants_dir, rows;
  std::vector<std::string> tests;  // graded tests (tests/<lab>/<t>, with <t>.manifest.json)
  std::vector<std::string>
      publics;  // public tests (labs/<lab>/<p>), with tests/<lab>/<p>.public_manifest.json
  int jobs = 2;
  double public_timeout_s = 60;  // per case, for the public variants (gate 4)
  // The grading data and rules: the lab's limits and timings go to the runner; the symbol rules, the
  // freshness of tests/<lab>/grading.json and the hints are checked after gate 3 (DataGates).
  std::string root = ".", limits, symbols, grading;
  bool refresh_all = false;
  // The grading seeds to run the gates under (default: 1), and the one a run uses (RunVariant: the runner's
  // --seed, so every case gets DISTLAB_GRADING_SEED; empty: unset, which the tests read as 1).
  std::vector<std::string> seeds;
  std::string seed;
  bool hint_stability = false;  // run every mutant's every case under each seed and match its hints
  std::string out;              // fairness: every case run, as TSV
  int seed_jobs = 2;            // fairness: cases at a time within one seed's runner
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
  std::map<std::string, double> seconds;                   // per case
  std::set<std::string> todo;                              // failed cases whose output names a TODO
};

// Reads a runner's report into *v (ok).
void ReadVerdicts(const std::string& report, Verdicts* v) {
  json r = ReadJson(report);
  for (auto& c : r["cases"]) {
    const std::string name = c["name"].get<std::string>(), status = c["status"].get<std::string>();
    v->cases.emplace_back(name, status);
    v->seconds[name] = c.value("seconds", 0.0);
    if (status == "failed" && c.value("output", std::string()).find("TODO(") != std::string::npos) {
      v->todo.insert(name);
    }
  }
  v->ok = true;
}

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
  if (!o.seed.empty()) argv.insert(argv.end(), {"--seed", o.seed});
  if (!o.limits.empty()) argv.insert(argv.end(), {"--limits", o.limits});
  if (!o.grading.empty() && std::filesystem::exists(o.grading))
    argv.insert(argv.end(), {"--timings", o.grading});
  const int rc = RunQuiet(argv);
  if (!std::filesystem::exists(out)) {
    v.error = "the runner wrote no report for " + variant + " (exit " + std::to_string(rc) + ")";
    return v;
  }
  ReadVerdicts(out, &v);
  return v;
}

// Runs several graded variants in one runner, so that --jobs cases run at a time across all of them (not
// fail-fast; --blocked-after 0: each case gets its own verdict). `variants`: (variant, its manifest). Returns
// the verdicts by variant, in no particular order of running.
std::map<std::string, Verdicts> RunBatch(const LabOptions& o,
                                         const std::vector<std::pair<std::string, std::string>>& variants,
                                         const std::string& scratch) {
  std::map<std::string, Verdicts> out;
  std::vector<std::string> argv = {o.runner,          "--jobs", std::to_string(o.jobs), "--show", "none",
                                   "--blocked-after", "0"};
  std::vector<std::string> built;
  for (const auto& [variant, manifest] : variants) {
    const std::string binary = o.bin + "/tests/" + o.lab + "/" + variant;
    if (!std::filesystem::exists(binary)) {
      out[variant].error = binary + " was not built";
      continue;
    }
    argv.insert(argv.end(), {"--binary", binary, "--manifest", manifest, "--json",
                             scratch + "/" + variant + ".json", "--label", variant});
    built.push_back(variant);
  }
  if (built.empty()) return out;
  if (!o.seed.empty()) argv.insert(argv.end(), {"--seed", o.seed});
  if (!o.limits.empty()) argv.insert(argv.end(), {"--limits", o.limits});
  if (!o.grading.empty() && std::filesystem::exists(o.grading))
    argv.insert(argv.end(), {"--timings", o.grading});
  for (const auto& variant : built) std::filesystem::remove(scratch + "/" + variant + ".json");
  const int rc = RunQuiet(argv);
  for (const auto& variant : built) {
    Verdicts& v = out[variant];
    const std::string report = scratch + "/" + variant + ".json";
    if (!std::filesystem::exists(report)) {
      v.error = "the runner wrote no report for " + variant + " (exit " + std::to_string(rc) + ")";
    } else {
      ReadVerdicts(report, &v);
    }
  }
  return out;
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

// Runs a shell command line; returns its stdout and sets *status.
std::string Shell(const std::string& cmd, int* status) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// The graded tests of `tests` whose manifests list a variant of mutant m (the tests that grade its piece).
std::vector<std::string> TestsGrading(const LabOptions& o, const Mutant& m) {
  std::vector<std::string> out;
  for (const auto& t : o.tests) {
    json man = ReadJson(o.bin + "/tests/" + o.lab + "/" + t + ".manifest.json");
    for (auto& v : man["variants"]) {
      if (v.get<std::string>() == "mutant:" + t + "_mutant_" + m.what) out.push_back(t);
    }
  }
  return out;
}

std::vector<Signature> SignaturesOf(const GradingData& data, const std::vector<Mutant>& mutants) {
  std::vector<Signature> sigs;
  for (const Mutant& m : mutants) {
    auto it = data.signatures.find(m.stem + "__" + m.what);
    if (it != data.signatures.end()) sigs.push_back({it->first, m.hint, it->second.tests});
  }
  return sigs;
}

// The checks on the lab's grading data and rules, after gate 3 (one check each):
//   symbol rules   the solution's, the stubs' and every mutant's objects pass the lab's symbol rules
//   grading data   tests/<lab>/grading.json is fresh: the lab's and each mutant's inputs hash as recorded,
//                  every graded case has a measured time, every mutant a signature on exactly the tests of
//                  its piece (the case gate 3 killed it with, when its signature lacks it, is a note: a
//                  mutant's failures can vary with timing)
//   hints          the stubs' failures (TODO failures left out) match no mutant; and, as a row, how many
//                  mutants get their own hint first when graded (from their signatures)
std::pair<int, int> DataGates(const LabOptions& o, const std::vector<Mutant>& mutants,
                              const CaseSets& stub_failing,
                              const std::map<std::string, std::string>& killed_by,
                              std::vector<std::string>* rows) {
  int passed = 0, failed = 0;
  // Symbol rules.
  if (!o.symbols.empty()) {
    namespace fs = std::filesystem;
    std::string objects;
    int n = 0;
    for (const std::string dir :
         {o.bin + "/solutions/" + o.lab + "/_objs", o.bin + "/labs/" + o.lab + "/_objs/student_impl",
          o.bin + "/tests/" + o.lab + "/_objs"}) {
      if (!fs::exists(dir)) continue;
      for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        const std::string p = it->path().string();
        const std::string parent = it->path().parent_path().filename().string();
        const bool wanted =
            parent.rfind("part_", 0) == 0 || parent == "student_impl" || parent.rfind("impl_mutant_", 0) == 0;
        if (it->is_regular_file() && wanted && p.size() > 2 && p.compare(p.size() - 2, 2, ".o") == 0) {
          objects += " --object " + Quote(parent + "/" + it->path().filename().string() + "=" + p);
          ++n;
        }
      }
    }
    int st = 0;
    const std::string out =
        Shell(Quote(o.symbols) + " check --rules " + Quote(o.bin + "/labs/" + o.lab + "/symbol_rules.json") +
                  " --reference " + Quote(o.bin + "/solutions/" + o.lab + "/reference_symbols.txt") +
                  objects + " 2>&1",
              &st);
    const bool ok = st == 0 && n > 0;
    (ok ? passed : failed) += 1;
    std::printf("[%s] symbol rules on %d solution, stub and mutant objects: %s\n", o.lab.c_str(), n,
                ok ? "pass" : "BROKEN");
    if (!ok) std::printf("%s", out.c_str());
    rows->push_back("symbol rules\t" + std::to_string(n) + " objects " + (ok ? "pass" : "BROKEN"));
  }
  if (o.grading.empty()) return {passed, failed};

  // Grading data.
  const std::string rel = "tests/" + o.lab + "/grading.json";
  const std::string refresh = "run ./labctl check-tests " + o.lab + " (it remeasures " + rel +
                              ") and commit " + rel + " with your change";
  std::vector<std::string> stale, varies;
  GradingData data;
  if (!std::filesystem::exists(o.grading)) {
    stale.push_back("no " + o.grading);
  } else {
    data = ReadGradingData(o.grading);
    if (data.inputs != InputsHash(o.root, o.lab)) stale.push_back("the lab's sources changed");
    for (const auto& t : o.tests) {
      json man = ReadJson(o.bin + "/tests/" + o.lab + "/" + t + ".manifest.json");
      for (auto& [c, p] : man["cases"].items()) {
        if (!data.timings.count(t) || !data.timings[t].count(c))
          stale.push_back("no time for " + t + " " + c);
      }
    }
    std::set<std::string> names;
    for (const Mutant& m : mutants) {
      const std::string name = m.stem + "__" + m.what;
      names.insert(name);
      auto it = data.signatures.find(name);
      if (it == data.signatures.end()) {
        stale.push_back("no signature for " + name);
        continue;
      }
      if (it->second.inputs != InputsHash(o.root, o.lab, m.path)) stale.push_back(name + " changed");
      std::set<std::string> want, have;
      for (const auto& t : TestsGrading(o, m)) want.insert(t);
      for (const auto& [t, cases] : it->second.tests) have.insert(t);
      if (want != have) stale.push_back(name + ": the tests of its piece changed");
      auto k = killed_by.find(name);
      if (k != killed_by.end()) {
        bool in = false;
        for (const auto& [t, cases] : it->second.tests) in |= cases.count(k->second) > 0;
        // Not a staleness: the hashes say that. A mutant whose failures depend on timing (a dataloader
        // worker's prefetch depth) can fail a case in gate 3 that its recorded run passed.
        if (!in) varies.push_back(name + ": gate 3 killed it with " + k->second + ", not in its signature");
      }
    }
    for (const auto& [name, sig] : data.signatures) {
      if (!names.count(name)) stale.push_back("a signature for " + name + ", which is no mutant");
    }
  }
  const bool fresh = stale.empty();
  (fresh ? passed : failed) += 1;
  std::printf("[%s] grading data %s: %s\n", o.lab.c_str(), o.grading.c_str(),
              fresh ? "fresh" : ("STALE: " + refresh).c_str());
  for (size_t i = 0; i < stale.size() && i < 12; ++i) std::printf("  stale: %s\n", stale[i].c_str());
  if (stale.size() > 12) std::printf("  ... and %zu more\n", stale.size() - 12);
  for (const auto& v : varies) std::printf("  note (failures vary from run to run): %s\n", v.c_str());
  rows->push_back("grading data\t" + std::string(fresh ? "fresh" : "STALE: " + refresh));
  if (!fresh && data.signatures.empty()) return {passed, failed};

  // Hints: the stubs get none; each mutant's own failures give its own hint first (a row, not a check).
  const std::vector<Signature> sigs = SignaturesOf(data, mutants);
  std::set<std::string> all(o.tests.begin(), o.tests.end());
  const auto stub_hints = MatchHints(sigs, stub_failing, all);
  (stub_hints.empty() ? passed : failed) += 1;
  if (!stub_hints.empty()) std::printf("  THE STUBS GET A HINT: %s\n", stub_hints[0].hint.c_str());
  int hits = 0;
  std::vector<std::string> misses;
  for (const Signature& s : sigs) {
    const auto m = MatchHints(sigs, s.failing, all);
    if (!m.empty() && m[0].hint == s.hint) {
      ++hits;
    } else {
      misses.push_back(s.mutant);
    }
  }
  std::string miss;
  for (const auto& x : misses) miss += (miss.empty() ? "; not first: " : " ") + x;
  rows->push_back("hints\tstubs " + std::string(stub_hints.empty() ? "none" : "GET ONE") +
                  "; own hint first for " + std::to_string(hits) + " of " + std::to_string(sigs.size()) +
                  " mutants" + miss);
  return {passed, failed};
}

// The grading seed tests/<lab>/grading.json is measured under: 1, what a plain `bazel test` draws
// (kDefaultGradingSeed, tools/testing/test_support.h), so that the recorded signatures are the failures a
// student sees with the public harness and a default run.
constexpr uint64_t kMeasuredSeed = 1;

// Remeasures tests/<lab>/grading.json: the solution's time per graded case (every graded test run through the
// runner, as a grading runs it) and the signature of every mutant whose inputs changed (or all, with --all):
// each test that grades its piece run in full, every case.
int Refresh(const LabOptions& o) {
  char tmpl[] = "/tmp/distlab-refresh.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string scratch = tmpl;
  GradingData data;
  if (std::filesystem::exists(o.grading)) data = ReadGradingData(o.grading);
  data.lab = o.lab;
  const std::string inputs = InputsHash(o.root, o.lab);
  // Everything is measured under kMeasuredSeed; data measured under another seed is measured again.
  const bool seed_changed = data.seed != kMeasuredSeed;
  const bool lab_changed = data.inputs != inputs || o.refresh_all || seed_changed;
  data.inputs = inputs;
  data.seed = kMeasuredSeed;
  LabOptions run = o;
  run.grading = "";  // the solution runs with the manifests' timeouts
  run.seed = std::to_string(kMeasuredSeed);
  auto manifest_of = [&](const std::string& t) {
    return o.bin + "/tests/" + o.lab + "/" + t + ".manifest.json";
  };
  bool timings_complete = true;
  for (const auto& t : o.tests) {
    json man = ReadJson(manifest_of(t));
    for (auto& [c, p] : man["cases"].items()) timings_complete &= data.timings[t].count(c) > 0;
  }
  if (lab_changed || !timings_complete) {
    data.timings.clear();
    for (const auto& t : o.tests) {
      Verdicts v = RunVariant(run, t, manifest_of(t), /*fail_fast=*/false, scratch);
      if (!v.ok) throw std::runtime_error(v.error);
      for (const auto& [c, status] : v.cases) {
        if (status != "passed" && status != "skipped") {
          throw std::runtime_error("the solution fails " + t + " " + c + " (" + status + "): fix that first");
        }
        data.timings[t][c] = v.seconds[c];
      }
      std::printf("[%s] timed %s: %zu cases\n", o.lab.c_str(), t.c_str(), v.cases.size());
    }
  }
  // The mutants run with the timeouts the grader will use.
  const std::string timings = scratch + "/timings.json";
  WriteGradingData(timings, data);
  run.grading = timings;
  const std::vector<Mutant> mutants = ReadMutants(o.mutants_dir);
  std::set<std::string> names;
  int measured = 0;
  for (const Mutant& m : mutants) {
    const std::string name = m.stem + "__" + m.what;
    names.insert(name);
    const std::string h = InputsHash(o.root, o.lab, m.path);
    auto it = data.signatures.find(name);
    if (!o.refresh_all && !seed_changed && it != data.signatures.end() && it->second.inputs == h) continue;
    MutantSignature sig;
    sig.inputs = h;
    for (const auto& t : TestsGrading(o, m)) {
      Verdicts v = RunVariant(run, t + "_mutant_" + m.what, manifest_of(t), /*fail_fast=*/false, scratch);
      if (!v.ok) throw std::runtime_error(v.error);
      auto& set = sig.tests[t];
      for (const auto& [c, status] : v.cases) {
        if (status == "failed") set.insert(c);
      }
    }
    size_t n = 0;
    for (const auto& [t, cases] : sig.tests) n += cases.size();
    std::printf("[%s] signature of %-45s %zu failed case(s) on %zu test(s)\n", o.lab.c_str(), name.c_str(), n,
                sig.tests.size());
    data.signatures[name] = sig;
    ++measured;
  }
  for (auto it = data.signatures.begin(); it != data.signatures.end();) {
    it = names.count(it->first) ? std::next(it) : data.signatures.erase(it);
  }
  WriteGradingData(o.grading, data);
  std::filesystem::remove_all(scratch);
  std::printf("[%s] wrote %s (%s; %d mutant signature(s) measured, %zu kept)\n", o.lab.c_str(),
              o.grading.c_str(), lab_changed || !timings_complete ? "solution timed" : "timings kept",
              measured, data.signatures.size() - measured);
  return 0;
}

// The table rows of gates that run once per seed, grouped by gate (in the order the gates first appear), each
// result led by "seed S: ".
class SeedRows {
 public:
  void Add(const std::string& gate, const std::string& seed, const std::string& result) {
    if (!by_gate_.count(gate)) order_.push_back(gate);
    by_gate_[gate].push_back(gate + "\tseed " + seed + ": " + result);
  }
  void AppendTo(std::vector<std::string>* rows) const {
    for (const auto& g : order_) rows->insert(rows->end(), by_gate_.at(g).begin(), by_gate_.at(g).end());
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> by_gate_;
};

// What one seed's gates found: the counts of its checks, and what the data checks compare with the recorded
// signatures.
struct SeedOutcome {
  int passed = 0, failed = 0, skipped = 0;
  CaseSets stub_failing;                         // failed stub cases of tests where no failure names a TODO
  std::map<std::string, std::string> killed_by;  // <stem>__<what> -> the case gate 3 killed it with
};

// Hint stability under one seed: each mutant's failures on every case of the tests of its piece (`full`:
// mutant -> test -> verdicts) matched against the recorded signatures by the grader's matcher (MatchHints),
// as a grading of that mutant would match them. A test where a failure names a TODO or a case was not judged
// is left out, as the grader leaves it out. One check: at least 90 % of the mutants get their own hint first.
void HintStability(const LabOptions& o, const std::vector<Mutant>& mutants,
                   const std::vector<Signature>& sigs,
                   const std::map<std::string, std::map<std::string, Verdicts>>& full, SeedOutcome* out,
                   SeedRows* rows) {
  const std::string rel = "tests/" + o.lab + "/grading.json";
  if (sigs.empty()) {
    ++out->failed;
    std::printf("  no mutant signatures in %s: run ./labctl check-tests %s first\n", rel.c_str(),
                o.lab.c_str());
    rows->Add("hint stability", o.seed, "no signatures in " + rel + ": FAILED");
    return;
  }
  int own = 0, total = 0;
  std::vector<std::string> misses;
  for (const Mutant& m : mutants) {
    const std::string name = m.stem + "__" + m.what;
    ++total;
    CaseSets failing;
    std::set<std::string> graded(o.tests.begin(), o.tests.end());
    auto it = full.find(name);
    if (it != full.end()) {
      for (const auto& [t, v] : it->second) {
        bool judged = v.ok && v.todo.empty();
        for (const auto& [c, status] : v.cases) judged &= status != "not_run";
        if (!judged) {
          graded.erase(t);
          continue;
        }
        for (const auto& [c, status] : v.cases) {
          if (status == "failed") failing[t].insert(c);
        }
      }
    }
    const OwnHint h = MatchOwnHint(sigs, name, failing, graded);
    size_t n = 0;
    for (const auto& [t, cases] : failing) n += cases.size();
    if (h.first) {
      ++own;
      std::printf("  own first  %-45s %zu failed case(s), similarity to its signature %.2f\n", name.c_str(),
                  n, h.own_similarity);
      continue;
    }
    if (h.first_mutant.empty()) {
      misses.push_back(name + " (none)");
      std::printf("  NO HINT    %-45s %zu failed case(s), similarity to its signature %.2f (under %.1f)\n",
                  name.c_str(), n, h.own_similarity, kHintThreshold);
    } else {
      misses.push_back(name + " (" + h.first_mutant + ")");
      std::printf(
          "  NOT FIRST  %-45s %zu failed case(s) give %s's hint first (similarity %.2f; to its own "
          "signature %.2f)\n",
          name.c_str(), n, h.first_mutant.c_str(), h.first_similarity, h.own_similarity);
    }
  }
  // The issue's bar: 90 % of the mutants under every seed.
  const bool ok = own * 10 >= total * 9;
  (ok ? out->passed : out->failed) += 1;
  std::string miss;
  for (const auto& x : misses) miss += (miss.empty() ? "; not first: " : " ") + x;
  rows->Add("hint stability", o.seed,
            "own hint first for " + std::to_string(own) + " of " + std::to_string(total) + " mutants (" +
                std::to_string(total ? 100 * own / total : 0) + " %" + (ok ? "" : ", under the 90 % bar") +
                ")" + miss);
}

// Gates 2, 3 and 4 under one seed (o.seed), and with o.hint_stability the hints' stability; their rows go to
// *rows, their checks to the outcome.
SeedOutcome GatesUnderSeed(const LabOptions& o, const std::vector<Mutant>& mutants,
                           const std::vector<Signature>& sigs, const std::string& scratch, SeedRows* rows) {
  SeedOutcome out;
  const char* lab = o.lab.c_str();
  const char* seed = o.seed.c_str();
  auto manifest_of = [&](const std::string& t) {
    return o.bin + "/tests/" + o.lab + "/" + t + ".manifest.json";
  };

  std::printf("[%s] seed %s: gate 2: every graded case must fail on the stubs\n", lab, seed);
  int g2_fail = 0, g2_pass = 0, g2_skip = 0;
  std::vector<std::pair<std::string, std::string>> stubs;
  for (const auto& t : o.tests) stubs.emplace_back(t + "_stub", manifest_of(t));
  std::map<std::string, Verdicts> stub_verdicts = RunBatch(o, stubs, scratch);
  for (const auto& t : o.tests) {
    const Verdicts& v = stub_verdicts[t + "_stub"];
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
      // A test where some failure names a TODO says nothing about mistakes (hints.h): left out, as the grader
      // leaves it out.
      if (status == "failed" && v.todo.empty()) out.stub_failing[t].insert(c);
    }
  }
  rows->Add("gate 2 (stubs fail)", o.seed,
            std::to_string(g2_fail) + " cases fail, " + std::to_string(g2_pass) + " pass (bad), " +
                std::to_string(g2_skip) + " skipped");

  // With --hint-stability every mutant runs every case of the tests of its piece (in one runner, all cores
  // busy); gate 3 reads its verdict from those runs instead of a fail-fast run of its own.
  std::map<std::string, std::map<std::string, Verdicts>> full;  // mutant -> test -> verdicts
  if (o.hint_stability) {
    std::vector<std::pair<std::string, std::string>> variants;
    for (const Mutant& m : mutants) {
      for (const auto& t : TestsGrading(o, m)) variants.emplace_back(t + "_mutant_" + m.what, manifest_of(t));
    }
    std::printf("[%s] seed %s: every case of the %zu mutant variants (for gate 3 and the hints)\n", lab, seed,
                variants.size());
    std::map<std::string, Verdicts> all = RunBatch(o, variants, scratch);
    for (const Mutant& m : mutants) {
      for (const auto& t : TestsGrading(o, m)) full[m.stem + "__" + m.what][t] = all[t + "_mutant_" + m.what];
    }
  }

  std::printf("[%s] seed %s: gate 3: each of %zu mutants must fail a graded case\n", lab, seed,
              mutants.size());
  int killed = 0;
  std::vector<std::string> survivors;
  for (const Mutant& m : mutants) {
    const std::string name = m.stem + "__" + m.what;
    const std::vector<std::string> candidates = TestsOfPiece(o.tests, manifest_of, m, "_hidden_test");
    std::string by;
    if (o.hint_stability) {
      for (const auto& t : candidates) {
        const Verdicts& v = full[name][t];
        if (!v.ok) std::printf("  %s\n", v.error.c_str());
        for (const auto& [c, status] : v.cases) {
          if (status == "failed" && by.empty()) by = c;
        }
        if (!by.empty()) break;
      }
    } else {
      by = FirstFailingCase(o, m, candidates, manifest_of, /*public_tests=*/false, scratch);
    }
    if (!by.empty()) {
      out.killed_by[name] = by;
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
  std::string surv;
  for (const auto& s : survivors) surv += (surv.empty() ? ", survivors: " : " ") + s;
  rows->Add("gate 3 (mutants killed)", o.seed,
            std::to_string(killed) + " of " + std::to_string(mutants.size()) + " killed" + surv);

  // Gate 4: a convention mutant breaks a rule the handout states, so a public test must catch it.
  auto public_manifest_of = [&](const std::string& p) {
    return o.bin + "/tests/" + o.lab + "/" + p + ".public_manifest.json";
  };
  int conventions = 0, caught = 0;
  std::vector<std::string> uncaught;
  for (const Mutant& m : mutants) conventions += m.kind == "convention";
  std::printf("[%s] seed %s: gate 4: each of %d convention mutants must fail a public test\n", lab, seed,
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
  rows->Add("gate 4 (public catches)", o.seed,
            std::to_string(caught) + " of " + std::to_string(conventions) +
                " convention mutants fail a public test" + unc);

  if (o.hint_stability) {
    std::printf("[%s] seed %s: hint stability: does each mutant's own hint come first?\n", lab, seed);
    HintStability(o, mutants, sigs, full, &out, rows);
  }
  out.passed += g2_fail + killed + caught;
  out.failed += g2_pass + static_cast<int>(survivors.size()) + static_cast<int>(uncaught.size());
  out.skipped += g2_skip;
  return out;
}

// The gates of one lab, on variants built beforehand (labctl builds every graded test, manifest, stub and
// mutant variant of the lab in one Bazel invocation), under each seed of --seed (default 1: the runner gives
// every case DISTLAB_GRADING_SEED, so the hidden tests draw that seed's inputs):
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
//   hint stability  (--hint-stability) every mutant runs every case of the tests of its piece (gate 3 reads
//               its verdict from those runs), and its failures are matched against the signatures of
//               tests/<lab>/grading.json as the grader matches a submission's: at least 90 % of the mutants
//               get their own hint first (one check per seed)
// Gates 2-4 and the hint stability run once per seed (their checks count once per seed); the case lists and
// the data checks (DataGates) once, the latter against the runs under the seed grading.json was measured
// under (or the first seed). Prints each finding, appends the lab's table rows to --rows (lab TAB gate TAB
// result; the per-seed results led by "seed S: "), and ends with "N passed, N failed, N skipped". Exit status
// 1 when a check failed.
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

  const std::vector<Mutant> mutants = ReadMutants(o.mutants_dir);
  GradingData data;
  if (!o.grading.empty() && std::filesystem::exists(o.grading)) data = ReadGradingData(o.grading);
  const std::vector<Signature> sigs = SignaturesOf(data, mutants);
  const std::vector<std::string> seeds = o.seeds.empty() ? std::vector<std::string>{"1"} : o.seeds;
  const std::string recorded = std::to_string(data.seed);
  SeedRows seed_rows;
  SeedOutcome for_data;  // the runs the data checks compare with the recorded signatures
  bool have = false, have_recorded = false;
  for (const auto& seed : seeds) {
    LabOptions so = o;
    so.seed = seed;
    SeedOutcome s = GatesUnderSeed(so, mutants, sigs, scratch, &seed_rows);
    passed += s.passed;
    failed += s.failed;
    skipped += s.skipped;
    if (!have || (seed == recorded && !have_recorded)) {
      // gate 3's killing case is compared with the recorded signature only under the recorded seed: under
      // another seed the inputs differ, and so may the case that fails first.
      if (seed != recorded) s.killed_by.clear();
      for_data = s;
      have = true;
      have_recorded = seed == recorded;
    }
  }
  seed_rows.AppendTo(&rows);
  if (mutants.size() < 6) {
    std::printf("[%s] only %zu mutants (a lab has at least 6): counted as 1 failed\n", o.lab.c_str(),
                mutants.size());
    ++failed;
    rows.push_back("mutants\tonly " + std::to_string(mutants.size()) + " (a lab has at least 6): FAILED");
  }

  const auto [data_passed, data_failed] =
      DataGates(o, mutants, for_data.stub_failing, for_data.killed_by, &rows);
  passed += lists_ok + data_passed;
  failed += lists_bad + data_failed;
  if (!o.rows.empty()) {
    std::ofstream f(o.rows, std::ios::app);
    for (const auto& r : rows) f << o.lab << "\t" << r << "\n";
  }
  std::filesystem::remove_all(scratch);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}

// Spawns `argv` with stdout and stderr to `log`; returns its pid.
pid_t SpawnLogged(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f != nullptr) {
      ::dup2(::fileno(f), 1);
      ::dup2(::fileno(f), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string OneLine(std::string s) {
  s = FirstLineOf(s);
  for (char& c : s) {
    if (c == '\t' || c == '\r') c = ' ';
  }
  return s;
}

// At most this many failed runs are run again alone (a test that fails under every seed would fail 100).
constexpr size_t kMaxReruns = 20;

// One case of graded test `test` run alone (--jobs 1) under `seed`, as FairnessCheck runs it (the lab's
// limits, the grading timeouts): its manifest with only that case.
CaseRun RunAlone(const LabOptions& o, uint64_t seed, const std::string& test, const std::string& name,
                 const std::string& scratch) {
  const std::string dir = o.bin + "/tests/" + o.lab + "/";
  json m = ReadJson(dir + test + ".manifest.json");
  const json points = m["cases"].value(name, json(0));
  m["cases"] = json::object({{name, points}});
  const std::string manifest = scratch + "/alone.manifest.json", report = scratch + "/alone.json";
  std::ofstream(manifest) << m.dump();
  std::filesystem::remove(report);
  std::vector<std::string> argv = {
      o.runner,   "--jobs",   "1",          "--show", "none",   "--seed", std::to_string(seed),
      "--binary", dir + test, "--manifest", manifest, "--json", report};
  if (!o.limits.empty()) argv.insert(argv.end(), {"--limits", o.limits});
  if (!o.grading.empty() && std::filesystem::exists(o.grading))
    argv.insert(argv.end(), {"--timings", o.grading});
  RunQuiet(argv);
  CaseRun r{seed, test, name, "failed", 0, 0, "the runner wrote no report", ""};
  if (std::filesystem::exists(report)) {
    const json rep = ReadJson(report);  // a local: a range over a temporary's member would dangle
    for (auto& c : rep["cases"]) {
      r.status = c["status"].get<std::string>();
      r.seconds = c.value("seconds", 0.0);
      r.timeout_s = c.value("timeout_s", 0.0);
      r.reason = c.value("reason", std::string());
    }
  }
  return r;
}

// The solution's graded cases under every seed of --seed, as a grading runs them: per seed one runner over
// every graded binary of the lab (each case alone under case_init, with the lab's limits and the grader's
// per-case timeouts from tests/<lab>/grading.json), --seed-jobs cases at a time, and --jobs / --seed-jobs
// such runners (seeds) at a time. Reports every run that did not pass (seed, case, the first line of its
// reason), and per case its largest time over the seeds against the timeout the runner gave it: a case is
// tight when some seed took more than half of it (kTightShare) and it does again when that seed's case runs
// alone after the others (so a busy machine is not taken for a large draw), and its timeout must be the same
// under every seed. Failed runs run again alone too (up to kMaxReruns), which tells a failure of the draw
// from a disturbed run. Writes every run to --out (TSV) and the rows to --rows; the last line counts the case
// runs, plus one check for the timeouts (none tight, none varying).
int FairnessCheck(const LabOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  char tmpl[] = "/tmp/distlab-fairness.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string scratch = tmpl;
  const std::string dir = o.bin + "/tests/" + o.lab + "/";
  for (const auto& t : o.tests) {
    for (const std::string& f : {dir + t, dir + t + ".manifest.json"}) {
      if (!std::filesystem::exists(f)) throw std::runtime_error(f + " was not built");
    }
  }
  const int seed_jobs = std::max(1, o.seed_jobs);
  const size_t at_once = static_cast<size_t>(std::max(1, o.jobs / seed_jobs));
  const bool have_timings = !o.grading.empty() && std::filesystem::exists(o.grading);
  std::printf(
      "[%s] fairness: %zu graded test(s) of the solution under %zu seeds, through the grader's runner "
      "(each case alone, the lab's limits, %s); %zu seed(s) at a time, %d case(s) each\n",
      o.lab.c_str(), o.tests.size(), o.seeds.size(),
      (have_timings ? "the timeouts of tests/" + o.lab + "/grading.json" : "the manifests' timeouts").c_str(),
      at_once, seed_jobs);
  std::fflush(stdout);

  std::vector<CaseRun> runs;
  int untimed = 0;  // case runs whose timeout came from the manifest (no recorded time)
  std::map<pid_t, size_t> running;
  std::vector<Clock::time_point> started(o.seeds.size());
  size_t next = 0, done = 0;
  auto spawn = [&](size_t i) {
    const std::string sd = scratch + "/" + std::to_string(i);
    std::filesystem::create_directories(sd);
    std::vector<std::string> argv = {o.runner, "--jobs",   std::to_string(seed_jobs), "--show", "none",
                                     "--seed", o.seeds[i], "--blocked-after",         "0"};
    for (const auto& t : o.tests) {
      argv.insert(argv.end(), {"--binary", dir + t, "--manifest", dir + t + ".manifest.json", "--json",
                               sd + "/" + t + ".json", "--label", t});
    }
    if (!o.limits.empty()) argv.insert(argv.end(), {"--limits", o.limits});
    if (have_timings) argv.insert(argv.end(), {"--timings", o.grading});
    started[i] = Clock::now();
    running[SpawnLogged(argv, sd + "/runner.log")] = i;
  };
  while (done < o.seeds.size()) {
    while (running.size() < at_once && next < o.seeds.size()) spawn(next++);
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("waitpid failed");
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    ++done;
    const std::string sd = scratch + "/" + std::to_string(i);
    const uint64_t seed = *ParseSeed(o.seeds[i]);
    int p = 0, f = 0, k = 0;
    for (const auto& t : o.tests) {
      const std::string report = sd + "/" + t + ".json";
      if (!std::filesystem::exists(report)) {
        const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        runs.push_back({seed, t, "(every case)", "failed", 0, 0,
                        "the runner wrote no report (exit " + std::to_string(rc) +
                            "): " + OneLine(ReadText(sd + "/runner.log"))});
        ++f;
        continue;
      }
      json r = ReadJson(report);
      for (auto& c : r["cases"]) {
        CaseRun run{seed,
                    t,
                    c["name"].get<std::string>(),
                    c["status"].get<std::string>(),
                    c.value("seconds", 0.0),
                    c.value("timeout_s", 0.0),
                    c.value("reason", std::string())};
        p += run.status == "passed";
        k += run.status == "skipped";
        f += run.status != "passed" && run.status != "skipped";
        untimed += !c.value("timed_from_solution", false);
        runs.push_back(run);
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - started[i]).count();
    std::printf("  [%zu/%zu] seed %-16s %d passed, %d failed, %d skipped (%.1f s)\n", done, o.seeds.size(),
                o.seeds[i].c_str(), p, f, k, secs);
    std::fflush(stdout);
  }
  const double wall_runs = std::chrono::duration<double>(Clock::now() - t0).count();

  GradingData data;
  if (have_timings) data = ReadGradingData(o.grading);
  // Each failed run (up to kMaxReruns) and each case's slowest seed when over kTightShare run again, alone,
  // one at a time: what fails or is slow again is the draw's doing, not a busy machine's.
  std::vector<CaseRun> reruns;
  {
    const Fairness first = SummarizeFairness(runs, data.seed);
    std::vector<std::tuple<uint64_t, std::string, std::string>> again;
    for (const CaseRun& r : first.failures) {
      if (again.size() < kMaxReruns && r.name != "(every case)") again.emplace_back(r.seed, r.test, r.name);
    }
    for (const CaseSpread& c : first.spreads) {
      if (c.share() > kTightShare) again.emplace_back(c.max_seed, c.test, c.name);
    }
    if (!again.empty()) {
      std::printf(
          "[%s] running %zu case(s) again, alone: the failed runs and the cases over %.0f %% of their "
          "timeout, under the same seed\n",
          o.lab.c_str(), again.size(), 100 * kTightShare);
      std::fflush(stdout);
    }
    for (const auto& [seed, test, name] : again) reruns.push_back(RunAlone(o, seed, test, name, scratch));
  }
  const double wall_all = std::chrono::duration<double>(Clock::now() - t0).count();
  const Fairness fair = SummarizeFairness(runs, data.seed, reruns);
  const char* lab = o.lab.c_str();
  std::printf("[%s] %zu run(s) did not pass%s\n", lab, fair.failures.size(),
              fair.failures.empty() ? "" : ":");
  for (const CaseRun& r : fair.failures) {
    const std::string again = r.again.empty() ? ""
                              : r.again == "failed"
                                  ? "; fails again when run alone"
                                  : "; " + r.again + " when run again alone (flaky, or disturbed)";
    std::printf("  FAILED seed %llu %s %s (%s, %.2f s of %.1f%s): %s\n",
                static_cast<unsigned long long>(r.seed), r.test.c_str(), r.name.c_str(), r.status.c_str(),
                r.seconds, r.timeout_s, again.c_str(), OneLine(r.reason).c_str());
  }
  std::printf(
      "[%s] the cases closest to their timeout (largest time over the %zu seeds; a case is tight over "
      "%.0f %% of it):\n",
      lab, o.seeds.size(), kTightShare * 100);
  for (size_t i = 0; i < fair.spreads.size(); ++i) {
    const CaseSpread& c = fair.spreads[i];
    const bool tight = c.tight();
    if (i >= 8 && !tight && !c.timeout_varies) continue;
    char base[128] = "";
    if (c.base_seconds > 0) {
      std::snprintf(base, sizeof base, "; %.1fx its time under seed %llu", c.max_seconds / c.base_seconds,
                    static_cast<unsigned long long>(data.seed));
    }
    if (c.rerun_seconds >= 0) {
      const size_t n = std::strlen(base);
      std::snprintf(base + n, sizeof base - n, "; %.2f s when run again alone", c.rerun_seconds);
    }
    std::printf("  %-6s %s %s: %.2f s at seed %llu (fastest %.2f s%s) of %.1f s (%.0f %%)%s\n",
                tight ? "TIGHT" : "", c.test.c_str(), c.name.c_str(), c.max_seconds,
                static_cast<unsigned long long>(c.max_seed), c.min_seconds, base, c.timeout_s,
                100 * c.share(), c.timeout_varies ? "; ITS TIMEOUT VARIES WITH THE SEED" : "");
  }
  if (untimed > 0) {
    std::printf(
        "  note: %d case run(s) had no recorded time in tests/%s/grading.json, so their manifest's "
        "timeout\n",
        untimed, lab);
  }
  if (!o.out.empty()) {
    std::ofstream tsv(o.out);
    tsv << "seed\ttest\tcase\tstatus\tseconds\ttimeout_s\treason\n";
    for (const CaseRun& r : runs) {
      tsv << r.seed << "\t" << r.test << "\t" << r.name << "\t" << r.status << "\t" << r.seconds << "\t"
          << r.timeout_s << "\t" << OneLine(r.reason) << "\n";
    }
    std::printf("[%s] every run: %s\n", lab, o.out.c_str());
  }
  const size_t cases = fair.spreads.size();
  std::vector<std::string> rows;
  rows.push_back("fairness\t" + std::to_string(o.seeds.size()) + " seeds x " + std::to_string(cases) +
                 " cases: " + std::to_string(fair.passed) + " passed, " + std::to_string(fair.failed) +
                 " failed, " + std::to_string(fair.skipped) + " skipped" +
                 (fair.failed == 0 ? "" : ": FAILED (the runs above)"));
  if (!fair.spreads.empty()) {
    const CaseSpread& c = fair.spreads[0];
    char buf[512];
    char rerun[64] = "";
    if (c.rerun_seconds >= 0) std::snprintf(rerun, sizeof rerun, "; %.2f s run again alone", c.rerun_seconds);
    std::snprintf(
        buf, sizeof buf,
        "largest time %.0f %% of its timeout (%s %s: %.2f s at seed %llu of %.1f s%s); %d tight, %d "
        "with a timeout that varies",
        100 * c.share(), c.test.c_str(), c.name.c_str(), c.max_seconds,
        static_cast<unsigned long long>(c.max_seed), c.timeout_s, rerun, fair.tight, fair.varying_timeouts);
    rows.push_back(std::string("fairness timeouts\t") + buf);
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%.0f s for %zu seeds (%zu at a time, %d cases each), %.0f s for %zu rerun(s)", wall_runs,
                o.seeds.size(), at_once, seed_jobs, wall_all - wall_runs, reruns.size());
  rows.push_back(std::string("fairness time\t") + buf);
  if (!o.rows.empty()) {
    std::ofstream f(o.rows, std::ios::app);
    for (const auto& r : rows) f << o.lab << "\t" << r << "\n";
  }
  std::filesystem::remove_all(scratch);
  const bool timeouts_ok = fair.tight == 0 && fair.varying_timeouts == 0 && !fair.spreads.empty();
  std::printf("[%s] fairness: %.0f s wall for %zu seeds and %zu rerun(s)\n", lab, wall_all, o.seeds.size(),
              reruns.size());
  std::printf("%d passed, %d failed, %d skipped\n", fair.passed + (timeouts_ok ? 1 : 0),
              fair.failed + (timeouts_ok ? 0 : 1), fair.skipped);
  return fair.failed == 0 && timeouts_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{
      "The test-quality gates of a lab; checks around the grader: case lists, self-check results."};
  app.require_subcommand(1);
  std::string binary, manifest, results, expect;
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
  lab->add_option("--root", lo.root, "the checkout (for the grading data's input hashes)");
  lab->add_option("--limits", lo.limits, "the lab's limits JSON (//tests/<lab>:limits), for the runner");
  lab->add_option("--symbols", lo.symbols, "the symbols tool: check the lab's objects against its rules");
  lab->add_option("--grading", lo.grading, "tests/<lab>/grading.json: timings for the runner, checked fresh");
  lab->add_option("--seed", lo.seeds, "a grading seed to run gates 2-4 under (repeatable; default 1)");
  lab->add_flag("--hint-stability", lo.hint_stability,
                "run every mutant's every case under each seed and match its hints against the signatures");
  LabOptions fo;
  fo.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto* fair = app.add_subcommand("fairness", "the solution's graded cases under many seeds, as graded");
  fair->add_option("--lab", fo.lab, "the lab")->required();
  fair->add_option("--bin", fo.bin, "bazel-bin of the solution configuration")->required();
  fair->add_option("--runner", fo.runner, "the grader's runner binary")->required();
  fair->add_option("--test", fo.tests, "a graded test of the lab (repeatable)")->required();
  fair->add_option("--seed", fo.seeds, "a grading seed (repeatable)")->required();
  fair->add_option("--jobs", fo.jobs, "cases run at the same time in all (default: the number of cores)");
  fair->add_option("--seed-jobs", fo.seed_jobs,
                   "cases at the same time within one seed's runner (default 2)");
  fair->add_option("--limits", fo.limits, "the lab's limits JSON (//tests/<lab>:limits)");
  fair->add_option("--grading", fo.grading, "tests/<lab>/grading.json: the solution's times (timeouts)");
  fair->add_option("--out", fo.out, "write every case run here (TSV)");
  fair->add_option("--rows", fo.rows, "append the table rows to this file");
  std::vector<std::string> given_seeds;
  int seed_count = 0;
  auto* seeds = app.add_subcommand("seeds", "print the seeds of a check, one a line");
  seeds->add_option("--seed", given_seeds, "a seed to use (repeatable; none: 1)");
  seeds->add_option("--count", seed_count, "fresh seeds are added until there are this many");
  auto* refresh = app.add_subcommand("refresh", "remeasure tests/<lab>/grading.json (takes lab's options)");
  refresh->add_option("--lab", lo.lab, "the lab")->required();
  refresh->add_option("--bin", lo.bin, "bazel-bin of the solution configuration")->required();
  refresh->add_option("--runner", lo.runner, "the grader's runner binary")->required();
  refresh->add_option("--mutants", lo.mutants_dir, "tests/<lab>/mutants")->required();
  refresh->add_option("--test", lo.tests, "a graded test of the lab (repeatable)")->required();
  refresh->add_option("--jobs", lo.jobs, "cases run at the same time");
  refresh->add_option("--root", lo.root, "the checkout");
  refresh->add_option("--limits", lo.limits, "the lab's limits JSON");
  refresh->add_option("--grading", lo.grading, "tests/<lab>/grading.json to write")->required();
  refresh->add_flag("--all", lo.refresh_all, "remeasure everything, not only what changed");
  auto* list = app.add_subcommand("list", "a graded binary's case list must equal its manifest's points");
  list->add_option("--binary", binary, "a grader-built variant of the graded test")->required();
  list->add_option("--manifest", manifest, "its manifest")->required();
  std::string mutants_dir, kind;
  bool what_only = false;
  auto* mut = app.add_subcommand("mutants", "check and list a lab's mutants: name, kind, hint");
  mut->add_option("--dir", mutants_dir, "tests/<lab>/mutants")->required();
  mut->add_option("--kind", kind, "only the mutants of this kind")
      ->check(distlab::cli::IsMember({"logic", "convention"}));
  mut->add_flag("--what", what_only, "print only each mutant's <what> (its variants' suffix), one a line");
  auto* first_hint =
      app.add_subcommand("first-hint", "print the first hint of a results.json (none: nothing)");
  first_hint->add_option("--results", results, "results.json")->required();
  auto* first = app.add_subcommand("first-case", "print the manifest's first case");
  first->add_option("--manifest", manifest, "the manifest")->required();
  auto* res = app.add_subcommand("results", "check a results.json against what the self-check expects");
  res->add_option("--results", results, "results.json")->required();
  res->add_option("--expect", expect, "full | zero | touched")
      ->required()
      ->check(distlab::cli::IsMember({"full", "zero", "touched"}));
  ResultsCheck rc;
  res->add_option("--case", rc.touched, "a case a cheat touched (for --expect touched; repeatable)");
  res->add_option("--reason", rc.reasons, "CASE=TEXT: that case's output says TEXT (CASE * = any case)");
  res->add_option("--output-contains", rc.output_contains, "the overall output says TEXT (repeatable)");
  auto* cases = app.add_subcommand("cases", "print the manifest's cases, one per line");
  cases->add_option("--manifest", manifest, "the manifest")->required();
  DISTLAB_CLI_PARSE(app, argc, argv);
  try {
    for (const auto* list : {&lo.seeds, &fo.seeds, &given_seeds}) {
      for (const auto& s : *list) {
        if (!ParseSeed(s)) {
          throw std::runtime_error("--seed " + s + ": a seed is a whole number from 0 to " +
                                   std::to_string(kMaxSeed));
        }
      }
    }
    if (*lab) return Lab(lo);
    if (*fair) return FairnessCheck(fo);
    if (*seeds) {
      std::vector<uint64_t> given;
      for (const auto& s : given_seeds) given.push_back(*ParseSeed(s));
      for (uint64_t s : SeedList(given, static_cast<size_t>(std::max(0, seed_count)), FreshSeed)) {
        std::printf("%llu\n", static_cast<unsigned long long>(s));
      }
      return 0;
    }
    if (*refresh) return Refresh(lo);
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
    if (*first_hint) {
      json r = ReadJson(results);
      const json hints = r.value("extra_data", json::object()).value("hints", json::array());
      if (!hints.empty()) std::printf("%s\n", hints[0].value("hint", std::string()).c_str());
      return 0;
    }
    if (*first) {
      json m = ReadJson(manifest);
      if (m["cases"].empty()) throw std::runtime_error("no cases in " + manifest);
      std::printf("%s\n", m["cases"].begin().key().c_str());
      return 0;
    }
    if (*res) {
      rc.path = results;
      rc.expect = expect;
      return Results(rc);
    }
    if (*cases) {
      json m = ReadJson(manifest);
      for (auto& [c, p] : m["cases"].items()) std::printf("%s\n", c.c_str());
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gates: %s\n", e.what());
    return 2;
  }
  return 2;
}
