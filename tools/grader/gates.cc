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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"
#include "tools/grader/grading_data.h"
#include "tools/grader/hints.h"
#include "tools/grader/mutants.h"

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
  if (!o.limits.empty()) argv.insert(argv.end(), {"--limits", o.limits});
  if (!o.grading.empty() && std::filesystem::exists(o.grading))
    argv.insert(argv.end(), {"--timings", o.grading});
  const int rc = RunQuiet(argv);
  if (!std::filesystem::exists(out)) {
    v.error = "the runner wrote no report for " + variant + " (exit " + std::to_string(rc) + ")";
    return v;
  }
  json r = ReadJson(out);
  for (auto& c : r["cases"]) {
    const std::string name = c["name"].get<std::string>(), status = c["status"].get<std::string>();
    v.cases.emplace_back(name, status);
    v.seconds[name] = c.value("seconds", 0.0);
    if (status == "failed" && c.value("output", std::string()).find("TODO(") != std::string::npos) {
      v.todo.insert(name);
    }
  }
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
  const bool lab_changed = data.inputs != inputs || o.refresh_all;
  data.inputs = inputs;
  LabOptions run = o;
  run.grading = "";  // the solution runs with the manifests' timeouts
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
    if (!o.refresh_all && it != data.signatures.end() && it->second.inputs == h) continue;
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
  CaseSets stub_failing;  // for the hints check: failed stub cases of tests where no failure names a TODO
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
      // A test where some failure names a TODO says nothing about mistakes (hints.h): left out, as the grader
      // leaves it out.
      if (status == "failed" && v.todo.empty()) stub_failing[t].insert(c);
    }
  }
  rows.push_back("gate 2 (stubs fail)\t" + std::to_string(g2_fail) + " cases fail, " +
                 std::to_string(g2_pass) + " pass (bad), " + std::to_string(g2_skip) + " skipped");

  const std::vector<Mutant> mutants = ReadMutants(o.mutants_dir);
  std::printf("[%s] gate 3: each of %zu mutants must fail a graded case\n", o.lab.c_str(), mutants.size());
  int killed = 0;
  std::vector<std::string> survivors;
  std::map<std::string, std::string> killed_by;  // <stem>__<what> -> the case that failed
  for (const Mutant& m : mutants) {
    const std::vector<std::string> candidates = TestsOfPiece(o.tests, manifest_of, m, "_hidden_test");
    const std::string by = FirstFailingCase(o, m, candidates, manifest_of, /*public_tests=*/false, scratch);
    if (!by.empty()) {
      killed_by[m.stem + "__" + m.what] = by;
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

  const auto [data_passed, data_failed] = DataGates(o, mutants, stub_failing, killed_by, &rows);
  passed = lists_ok + g2_fail + killed + caught + data_passed;
  failed = lists_bad + g2_pass + static_cast<int>(survivors.size()) + too_few +
           static_cast<int>(uncaught.size()) + data_failed;
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
    if (*lab) return Lab(lo);
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
