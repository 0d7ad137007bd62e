// report: turns the grader's manifests and the runner's per-case results into Gradescope's results.json.
//
// The expected cases and their points come only from the manifests (built from the grader's own checkout);
// a case the runner did not report, or a test that did not build, scores 0. Prints a table of the scores.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"

namespace {

using json = nlohmann::json;

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

}  // namespace

int main(int argc, char** argv) {
  std::string lab, out, build_log, notes, visibility = "after_published";
  std::vector<std::string> tests;
  double execution_time = 0;
  bool build_failed = false;
  CLI::App app{"Writes Gradescope's results.json from manifests and runner reports."};
  app.add_option("--lab", lab, "the lab graded")->required();
  app.add_option("--test", tests, "MANIFEST=RUNNER_JSON for each graded test (the JSON may be missing)");
  app.add_option("--build-log", build_log, "the build's output (shown when a test did not build)");
  app.add_flag("--build-failed", build_failed, "the build failed: every case of an unbuilt test scores 0");
  app.add_option("--notes", notes, "a file whose text opens the overall output");
  app.add_option("--visibility", visibility, "Gradescope visibility of each test")
      ->check(CLI::IsMember({"hidden", "after_due_date", "after_published", "visible"}));
  app.add_option("--execution-time", execution_time, "seconds the grading took");
  app.add_option("--out", out, "results.json to write")->required();
  CLI11_PARSE(app, argc, argv);

  try {
    json results_tests = json::array();
    double score = 0, max_score = 0;
    std::map<std::string, int> per_stage;
    std::map<std::string, std::pair<double, double>> stage_scores;
    std::string build_text = build_log.empty() ? "" : ReadFile(build_log, false);
    int unbuilt = 0;
    for (const std::string& t : tests) {
      size_t eq = t.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--test wants MANIFEST=RUNNER_JSON: " + t);
      json m = json::parse(ReadFile(t.substr(0, eq)));
      std::string runner_text = ReadFile(t.substr(eq + 1), false);
      json r = runner_text.empty() ? json() : json::parse(runner_text);
      std::map<std::string, json> by_case;
      if (!r.is_null()) {
        for (auto& c : r["cases"]) by_case[c["name"].get<std::string>()] = c;
      }
      if (r.is_null()) ++unbuilt;
      std::string stage = m["stage"].get<std::string>();
      std::string target = m["target"].get<std::string>();
      std::string short_target = target.substr(target.rfind(':') + 1);
      for (auto& [name, pts_json] : m["cases"].items()) {
        double pts = pts_json.get<double>();
        json c = by_case.count(name) ? by_case[name] : json();
        bool passed = !c.is_null() && c["status"] == "passed";
        std::string output;
        if (c.is_null()) {
          output = r.is_null()
                       ? "not graded: the test " + target + " did not build (see the build errors above)"
                       : "not graded: the runner has no result for this case";
        } else if (passed) {
          output = "passed";
        } else {
          std::string status = c["status"].get<std::string>();
          output = status == "skipped" ? "skipped (scores 0): " : "failed: ";
          output += c.value("reason", std::string());
          std::string text = c.value("output", std::string());
          if (!text.empty()) output += "\n\n" + text;
        }
        double got = passed ? pts : 0;
        int number = ++per_stage[stage];
        results_tests.push_back({{"name", name + " (stage " + stage + ", " + short_target + ")"},
                                 {"number", stage + "." + std::to_string(number)},
                                 {"score", got},
                                 {"max_score", pts},
                                 {"status", passed ? "passed" : "failed"},
                                 {"output", output},
                                 {"visibility", visibility}});
        score += got;
        max_score += pts;
        stage_scores[stage].first += got;
        stage_scores[stage].second += pts;
      }
    }
    std::ostringstream overall;
    std::string notes_text = notes.empty() ? "" : ReadFile(notes, false);
    overall << notes_text;
    overall << "Lab " << lab << ": " << score << " / " << max_score << " points\n";
    for (auto& [stage, s] : stage_scores)
      overall << "  stage " << stage << ": " << s.first << " / " << s.second << "\n";
    if (build_failed || unbuilt > 0) {
      overall << "\nThe build failed"
              << (unbuilt > 0 ? " (" + std::to_string(unbuilt) + " test(s) not built)" : "")
              << "; the compiler said:\n"
              << Tail(build_text, 20000);
    }
    json results = {{"score", score},          {"max_score", max_score},   {"execution_time", execution_time},
                    {"output", overall.str()}, {"visibility", visibility}, {"stdout_visibility", "hidden"},
                    {"tests", results_tests}};
    std::ofstream f(out);
    f << results.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    if (!f) throw std::runtime_error("cannot write " + out);

    std::printf("%-60s %8s %8s  %s\n", "case", "score", "max", "status");
    for (auto& t : results_tests) {
      std::printf("%-60s %8g %8g  %s\n", t["name"].get<std::string>().substr(0, 60).c_str(),
                  t["score"].get<double>(), t["max_score"].get<double>(),
                  t["status"].get<std::string>().c_str());
    }
    std::printf("score %g / %g\n", score, max_score);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "report: %s\n", e.what());
    return 2;
  }
  return 0;
}
