// report: turns the grader's manifests and the runner's per-case results into Gradescope's results.json, and
// prints the summary a student reads in a terminal.
//
// The expected cases and their points come only from the manifests (built from the grader's own checkout);
// a case the runner did not report, or a test that did not build, scores 0. Each case's name, points and
// failure message are shown to the student at once by default (visibility "visible"; the hidden tests'
// sources are never part of the results). When the failures on the tests of a piece match a mutant's recorded
// signature (--grading, --mutants; hints.h), the overall output, the summary and the matching cases add "this
// pattern of failures matches a known mistake: <hint>". The grading seed (--seed; seed.h) opens results.json:
// its "seed" field (also extra_data.seed) and the first line of its output, which says how to grade again
// with the same inputs.
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"
#include "tools/grader/grading_data.h"
#include "tools/grader/hints.h"
#include "tools/grader/mutants.h"
#include "tools/grader/seed.h"

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;  // results.json keeps its keys in the order written
using namespace distlab::grader;

std::string ReadFile(const std::string& path, bool must = true) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (must) throw std::runtime_error("cannot read " + path);
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& s, size_t cap) {
  if (s.size() <= cap) return s;
  return "[... " + std::to_string(s.size() - cap) + " bytes cut ...]\n" + s.substr(s.size() - cap);
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

struct Options {
  std::string lab, out, build_log, notes, visibility = "visible", mutants_dir, grading, stopped, seed;
  std::vector<std::string> tests;
  double execution_time = 0;
  bool build_failed = false, refused = false;
};

// One graded case as the report sees it.
struct Row {
  std::string test, name, stage;
  double points = 0, got = 0;
  std::string status;  // passed | failed
  std::string reason;  // first line: why it did not pass
  std::string output;  // what the student reads for this case
  bool todo = false;   // failed because something is still a stub
  bool ran = false;    // the runner judged it (not: refused, unbuilt, not run)
};

std::vector<HintMatch> Hints(const Options& o, const std::vector<Row>& rows) {
  if (o.grading.empty() || o.mutants_dir.empty()) return {};
  const GradingData data = ReadGradingData(o.grading);
  std::map<std::string, std::string> hint_of;
  for (const Mutant& m : ReadMutants(o.mutants_dir)) hint_of[m.stem + "__" + m.what] = m.hint;
  std::vector<Signature> sigs;
  for (const auto& [name, s] : data.signatures) {
    auto it = hint_of.find(name);
    if (it != hint_of.end()) sigs.push_back({name, it->second, s.tests});
  }
  // A test where some failure names a TODO uses a function that is still a stub: its failures say nothing
  // about mistakes, so it is left out (it neither matches nor counts against a signature). So is a test with
  // a case that was never judged (refused, not built, not run: stopped or out of time): such a case is no
  // failure of the code.
  std::set<std::string> stubbed;
  for (const Row& r : rows) {
    if (r.todo || !r.ran) stubbed.insert(r.test);
  }
  CaseSets failing;
  std::set<std::string> graded;
  for (const Row& r : rows) {
    if (stubbed.count(r.test)) continue;
    graded.insert(r.test);
    if (r.status != "passed") failing[r.test].insert(r.name);
  }
  return MatchHints(sigs, failing, graded);
}

int Run(const Options& o) {
  std::optional<uint64_t> seed;
  if (!o.seed.empty() && !(seed = ParseSeed(o.seed)))
    throw std::runtime_error("--seed: not a seed: " + o.seed);
  std::vector<Row> rows;
  std::string build_text = o.build_log.empty() ? "" : ReadFile(o.build_log, false);
  int unbuilt = 0;
  for (const std::string& t : o.tests) {
    size_t eq = t.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--test wants MANIFEST=RUNNER_JSON: " + t);
    json m = json::parse(ReadFile(t.substr(0, eq)));
    std::string runner_text = ReadFile(t.substr(eq + 1), false);
    json r = runner_text.empty() ? json() : json::parse(runner_text);
    std::map<std::string, json> by_case;
    if (!r.is_null()) {
      for (auto& c : r["cases"]) by_case[c["name"].get<std::string>()] = c;
    } else if (!o.refused && o.stopped.empty()) {
      ++unbuilt;
    }
    const std::string target = m["target"].get<std::string>();
    const std::string short_target = target.substr(target.rfind(':') + 1);
    for (auto& [name, pts_json] : m["cases"].items()) {
      Row row;
      row.test = short_target;
      row.name = name;
      row.stage = m["stage"].get<std::string>();
      row.points = pts_json.get<double>();
      json c = by_case.count(name) ? by_case[name] : json();
      const bool passed = !c.is_null() && c["status"] == "passed";
      if (c.is_null()) {
        row.reason = o.refused ? "not graded: the submission was refused (see the top of the output)"
                     : !o.stopped.empty() ? "not run: " + o.stopped
                     : r.is_null()        ? "not graded: the test " + target + " did not build"
                                          : "not graded: the runner has no result for this case";
        row.output = row.reason;
      } else if (passed) {
        row.output = "passed";
        row.ran = true;
      } else {
        const std::string status = c["status"].get<std::string>();
        const std::string reason = c.value("reason", std::string());
        row.reason = status == "skipped" ? "skipped (scores 0)" : reason;
        row.output = status == "skipped"   ? "skipped (scores 0): " + reason
                     : status == "not_run" ? reason
                                           : "failed: " + reason;
        const std::string text = c.value("output", std::string());
        if (!text.empty()) row.output += "\n\n" + text;
        row.todo = text.find("TODO(") != std::string::npos;
        row.ran = status != "not_run";
      }
      row.status = passed ? "passed" : "failed";
      row.got = passed ? row.points : 0;
      rows.push_back(row);
    }
  }

  const std::vector<HintMatch> hints = Hints(o, rows);
  std::map<std::pair<std::string, std::string>, std::string> hint_for_case;
  for (auto it = hints.rbegin(); it != hints.rend(); ++it) {
    for (const auto& tc : it->cases) hint_for_case[tc] = it->hint;  // the best match wins
  }

  ordered_json results_tests = ordered_json::array();
  double score = 0, max_score = 0;
  std::map<std::string, int> per_stage;
  std::map<std::string, std::pair<double, double>> stage_scores;
  for (const Row& row : rows) {
    std::string output = row.output;
    auto h = hint_for_case.find({row.test, row.name});
    if (h != hint_for_case.end()) {
      output = "this pattern of failures matches a known mistake: " + h->second + "\n\n" + output;
    }
    const int number = ++per_stage[row.stage];
    results_tests.push_back({{"name", row.name + " (stage " + row.stage + ", " + row.test + ")"},
                             {"number", row.stage + "." + std::to_string(number)},
                             {"score", row.got},
                             {"max_score", row.points},
                             {"status", row.status},
                             {"output", output},
                             {"visibility", o.visibility}});
    score += row.got;
    max_score += row.points;
    stage_scores[row.stage].first += row.got;
    stage_scores[row.stage].second += row.points;
  }

  std::ostringstream overall;
  if (seed) overall << SeedLine(*seed, o.lab) << "\n";
  overall << (o.notes.empty() ? "" : ReadFile(o.notes, false));
  overall << "Lab " << o.lab << ": " << score << " / " << max_score << " points\n";
  for (auto& [stage, s] : stage_scores)
    overall << "  stage " << stage << ": " << s.first << " / " << s.second << "\n";
  if (!o.stopped.empty()) overall << "\nGrading ended early: " << o.stopped << ".\n";
  if (!hints.empty()) {
    overall << "\n";
    for (const auto& m : hints) {
      std::set<std::string> tests;
      for (const auto& tc : m.cases) tests.insert(tc.first);
      std::string names;
      for (const auto& t : tests) names += (names.empty() ? "" : ", ") + t;
      overall << "This pattern of failures matches a known mistake: " << m.hint << " (" << m.cases.size()
              << " failed case(s) of " << names << ")\n";
    }
  }
  if (o.build_failed || unbuilt > 0) {
    overall << "\nThe build failed"
            << (unbuilt > 0 ? " (" + std::to_string(unbuilt) + " test(s) not built)" : "")
            << "; the compiler said:\n"
            << Tail(build_text, 20000);
  }
  ordered_json hint_data = ordered_json::array();
  for (const auto& m : hints) hint_data.push_back({{"hint", m.hint}, {"similarity", m.similarity}});
  ordered_json results = ordered_json::object();
  ordered_json extra = {{"hints", hint_data}};
  if (seed) {
    results["seed"] = *seed;
    extra["seed"] = *seed;
  }
  results["score"] = score;
  results["max_score"] = max_score;
  results["execution_time"] = o.execution_time;
  results["output"] = overall.str();
  results["visibility"] = o.visibility;
  results["stdout_visibility"] = "hidden";
  results["tests"] = results_tests;
  results["extra_data"] = extra;
  std::ofstream f(o.out);
  f << results.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  if (!f) throw std::runtime_error("cannot write " + o.out);

  // The terminal summary: the table, then every failed case with the first line of its reason, then hints.
  std::printf("%-60s %8s %8s  %s\n", "case", "score", "max", "status");
  for (const auto& t : results_tests) {
    std::printf("%-60s %8g %8g  %s\n", t["name"].get<std::string>().substr(0, 60).c_str(),
                t["score"].get<double>(), t["max_score"].get<double>(),
                t["status"].get<std::string>().c_str());
  }
  int nfailed = 0;
  for (const Row& row : rows) nfailed += row.status != "passed";
  if (nfailed > 0) {
    std::printf("\nfailed cases (%d):\n", nfailed);
    for (const Row& row : rows) {
      if (row.status == "passed") continue;
      std::printf("  %s (%s, %g pt): %s\n", row.name.c_str(), row.test.c_str(), row.points,
                  FirstLine(row.reason).substr(0, 200).c_str());
    }
  }
  for (const auto& m : hints) {
    std::printf("\nthis pattern of failures matches a known mistake: %s\n", m.hint.c_str());
  }
  if (seed)
    std::printf("\ngrading seed %llu (--seed %llu grades again with the same inputs)\n",
                static_cast<unsigned long long>(*seed), static_cast<unsigned long long>(*seed));
  std::printf("score %g / %g\n", score, max_score);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  distlab::cli::App app{"Writes Gradescope's results.json from manifests and runner reports."};
  app.add_option("--lab", o.lab, "the lab graded")->required();
  app.add_option("--test", o.tests, "MANIFEST=RUNNER_JSON for each graded test (the JSON may be missing)");
  app.add_option("--build-log", o.build_log, "the build's output (shown when a test did not build)");
  app.add_flag("--build-failed", o.build_failed, "the build failed: every case of an unbuilt test scores 0");
  app.add_flag("--refused", o.refused, "the submission was refused before anything ran: every case scores 0");
  app.add_option("--stopped", o.stopped, "why grading ended early: cases without a result are 'not run'");
  app.add_option("--notes", o.notes, "a file whose text opens the overall output");
  app.add_option("--visibility", o.visibility, "Gradescope visibility of each test")
      ->check(distlab::cli::IsMember({"hidden", "after_due_date", "after_published", "visible"}));
  app.add_option("--mutants", o.mutants_dir, "tests/<lab>/mutants: the hints");
  app.add_option("--grading", o.grading, "tests/<lab>/grading.json: the mutants' signatures");
  app.add_option("--execution-time", o.execution_time, "seconds the grading took");
  app.add_option("--seed", o.seed, "the grading seed: recorded at the top of results.json");
  app.add_option("--out", o.out, "results.json to write")->required();
  DISTLAB_CLI_PARSE(app, argc, argv);
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "report: %s\n", e.what());
    return 2;
  }
}
