// summarize: counts test cases from a `bazel test --build_event_json_file` run.
//
// Bazel reports targets; the course counts cases. For every test target of the run this reads its test.xml
// (GoogleTest's, or the one Bazel writes for a binary that crashed or timed out) and counts the <testcase>
// elements: a case with a <failure> or <error> failed, result="skipped" (GTEST_SKIP) or status="notrun" is
// skipped, any other passed. A target Bazel did not pass but whose XML shows no failed case (a crash after
// the last case, a sanitizer report at exit) adds one failed case; a test that did not build adds one failed
// case; a test skipped as incompatible with this machine adds one skipped case. Prints each failure and each
// skip reason (per target), then the last line "<passed> passed, <failed> failed, <skipped> skipped".
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"

namespace {

using json = nlohmann::json;

struct Counts {
  int passed = 0, failed = 0, skipped = 0;
};

std::string Attr(const std::string& tag, const std::string& name) {
  std::string key = " " + name + "=\"";
  size_t p = tag.find(key);
  if (p == std::string::npos) return "";
  p += key.size();
  size_t e = tag.find('"', p);
  return e == std::string::npos ? "" : tag.substr(p, e - p);
}

std::string Unescape(std::string s) {
  const std::pair<const char*, const char*> ents[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (auto& [from, to] : ents) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to)) {
      s.replace(p, std::strlen(from), to);
    }
  }
  return s;
}

// The reason of a GTEST_SKIP: the <skipped message="file:line&#x0A;reason"> of a case, without the location.
std::string SkipReason(const std::string& body) {
  std::string msg = Attr(body, "message");
  for (const char* nl : {"&#x0A;", "&#xA;", "&#10;"}) {
    for (size_t p = 0; (p = msg.find(nl, p)) != std::string::npos;) msg.replace(p, std::strlen(nl), "\n");
  }
  msg = Unescape(msg);
  const size_t nl = msg.find('\n');
  std::string reason = nl == std::string::npos ? msg : msg.substr(nl + 1);
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
  return reason.empty() ? "no reason given" : reason;
}

// Counts the cases of one test.xml; appends the names of failed cases to `failures` and the reason of each
// skipped case to `skips` (reason -> cases).
bool CountXml(const std::string& path, Counts* c, std::vector<std::string>* failures,
              std::map<std::string, int>* skips) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string x = ss.str();
  size_t pos = 0;
  while ((pos = x.find("<testcase", pos)) != std::string::npos) {
    size_t end = x.find('>', pos);
    if (end == std::string::npos) break;
    std::string tag = x.substr(pos, end - pos + 1);
    bool self_closed = tag.size() >= 2 && tag[tag.size() - 2] == '/';
    std::string body;
    size_t next = end + 1;
    if (!self_closed) {
      size_t close = x.find("</testcase>", end);
      if (close == std::string::npos) close = x.size();
      body = x.substr(end + 1, close - end - 1);
      next = close;
    }
    std::string name = Unescape(Attr(tag, "classname")) + "." + Unescape(Attr(tag, "name"));
    if (Attr(tag, "classname").empty()) name = Unescape(Attr(tag, "name"));
    if (body.find("<failure") != std::string::npos || body.find("<error") != std::string::npos) {
      ++c->failed;
      failures->push_back(name);
    } else if (Attr(tag, "result") == "skipped" || Attr(tag, "status") == "notrun") {
      ++c->skipped;
      const size_t sk = body.find("<skipped");
      ++(*skips)[sk == std::string::npos ? std::string("not run")
                                         : SkipReason(body.substr(sk, body.find('>', sk) - sk))];
    } else {
      ++c->passed;
    }
    pos = next;
  }
  return true;
}

std::string FromUri(std::string uri) {
  if (uri.rfind("file://", 0) == 0) uri = uri.substr(7);
  std::string out;
  for (size_t i = 0; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size()) {
      out += static_cast<char>(std::stoi(uri.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += uri[i];
    }
  }
  return out;
}

struct Target {
  std::string label;
  bool is_test = false;
  bool built_ok = true;
  bool incompatible = false;
  std::string build_problem;
  // (run, shard) -> (attempt, status, xml path)
  std::map<std::pair<int, int>, std::tuple<int, std::string, std::string>> results;
};

}  // namespace

int main(int argc, char** argv) {
  std::string bep, phase;
  bool built = false;
  distlab::cli::App app{"Counts test cases (passed, failed, skipped) from Bazel's build event JSON file."};
  app.add_option("bep", bep, "the --build_event_json_file of a bazel test run")->required();
  app.add_option("--phase", phase, "a name printed before each failure");
  app.add_flag("--built", built,
               "only print \"BUILT <label>\" for each target that built (for bazel build runs)");
  DISTLAB_CLI_PARSE(app, argc, argv);

  std::ifstream in(bep);
  if (!in) {
    std::fprintf(stderr, "summarize: cannot read %s\n", bep.c_str());
    return 2;
  }
  std::map<std::string, Target> targets;  // key: label + configuration
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json e;
    try {
      e = json::parse(line);
    } catch (...) {
      continue;
    }
    const json& id = e["id"];
    auto key_of = [](const json& tid) {
      std::string cfg = tid.contains("configuration") ? tid["configuration"].value("id", "") : "";
      return tid.value("label", "") + "|" + cfg;
    };
    if (id.contains("targetConfigured")) {
      // configured targets carry no configuration in their id; remember the kind by label
      std::string kind = e.contains("configured") ? e["configured"].value("targetKind", "") : "";
      if (kind.find("_test") != std::string::npos)
        targets["kind|" + id["targetConfigured"].value("label", "")].is_test = true;
    } else if (id.contains("targetCompleted")) {
      Target& t = targets[key_of(id["targetCompleted"])];
      t.label = id["targetCompleted"].value("label", "");
      if (e.contains("aborted")) {
        std::string reason = e["aborted"].value("reason", "");
        if (reason == "SKIPPED") {
          t.incompatible = true;
        } else {
          t.built_ok = false;
          t.build_problem = reason + " " + e["aborted"].value("description", "");
        }
      } else if (e.contains("completed") && !e["completed"].value("success", false)) {
        t.built_ok = false;
        t.build_problem = "did not build";
      } else if (built && e.contains("completed")) {
        std::printf("BUILT %s\n", t.label.c_str());
      }
    } else if (id.contains("testResult")) {
      const json& tid = id["testResult"];
      Target& t = targets[key_of(tid)];
      t.label = tid.value("label", "");
      std::string xml;
      for (auto& o : e["testResult"].value("testActionOutput", json::array())) {
        if (o.value("name", "") == "test.xml") xml = FromUri(o.value("uri", ""));
      }
      int attempt = tid.value("attempt", 1);
      auto k = std::make_pair(tid.value("run", 1), tid.value("shard", 1));
      auto it = t.results.find(k);
      if (it == t.results.end() || std::get<0>(it->second) <= attempt) {
        t.results[k] = {attempt, e["testResult"].value("status", "NO_STATUS"), xml};
      }
    }
  }

  if (built) return 0;
  Counts total;
  for (auto& [key, t] : targets) {
    if (key.rfind("kind|", 0) == 0) continue;
    bool is_test = targets.count("kind|" + t.label) && targets["kind|" + t.label].is_test;
    if (!is_test) continue;
    std::string pfx = phase.empty() ? "" : "[" + phase + "] ";
    if (t.incompatible && t.results.empty()) {
      ++total.skipped;
      continue;
    }
    if (t.results.empty()) {
      ++total.failed;
      std::printf("  %sFAILED %s: %s\n", pfx.c_str(), t.label.c_str(),
                  t.built_ok ? "no test result (not run)" : t.build_problem.c_str());
      continue;
    }
    for (auto& [k, r] : t.results) {
      const std::string& status = std::get<1>(r);
      Counts c;
      std::vector<std::string> failures;
      std::map<std::string, int> skips;
      bool have_xml = !std::get<2>(r).empty() && CountXml(std::get<2>(r), &c, &failures, &skips);
      for (auto& [reason, cases] : skips) {
        std::printf("  %sSKIPPED %s: %d case%s: %s\n", pfx.c_str(), t.label.c_str(), cases,
                    cases == 1 ? "" : "s", reason.c_str());
      }
      bool bazel_passed = status == "PASSED";
      if (!bazel_passed && c.failed == 0) {
        ++c.failed;
        failures.push_back("(the binary: " + status + (have_xml ? " after its cases" : ", no test.xml") +
                           ")");
      }
      if (bazel_passed && !have_xml) ++c.passed;
      total.passed += c.passed;
      total.failed += c.failed;
      total.skipped += c.skipped;
      for (auto& f : failures) std::printf("  %sFAILED %s %s\n", pfx.c_str(), t.label.c_str(), f.c_str());
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped);
  return 0;
}
