// The checkout's declarations about its labs, through Bazel (see checkout.h).
#include "tools/grader/checkout.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "tools/grader/process.h"

namespace distlab::grader {

namespace fs = std::filesystem;

const std::vector<std::string> kBazelFlags = {"--color=no", "--curses=no", "--show_progress_rate_limit=15"};

namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// "//labs/parallel:zero.cc" -> {"labs/parallel", "zero.cc"}.
std::pair<std::string, std::string> SplitLabel(const std::string& label) {
  const size_t colon = label.rfind(':');
  std::string pkg = label.substr(0, colon);
  if (pkg.rfind("//", 0) == 0) pkg = pkg.substr(2);
  return {pkg, colon == std::string::npos ? label : label.substr(colon + 1)};
}

}  // namespace

std::vector<std::string> Labs(const std::string& root) {
  std::vector<std::string> labs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root + "/labs", ec)) {
    if (fs::is_regular_file(e.path() / "lab.bzl")) labs.push_back(e.path().filename().string());
  }
  std::sort(labs.begin(), labs.end());
  return labs;
}

std::vector<std::string> BazelQuery(const std::string& root, const std::string& expr) {
  char tmpl[] = "/tmp/distlab-query.XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  Command c;
  c.argv = {"bazel", "query", "--noshow_progress", expr};
  c.cwd = root;
  c.err = fd >= 0 ? Sink::File(tmpl) : Sink::Null();
  WaitOptions w;
  w.stop_signal = SIGINT;
  int status = 0;
  const std::string out = Capture(c, &status, w);
  const std::string err = fd >= 0 ? ReadFile(tmpl) : "";
  if (fd >= 0) ::unlink(tmpl);
  if (status != 0) throw std::runtime_error("bazel query " + expr + " failed:\n" + err);
  return Lines(out);
}

std::vector<std::string> StudentFiles(const std::string& root, const std::string& lab) {
  std::vector<std::string> files;
  for (const auto& l : BazelQuery(root, "labels(srcs, //labs/" + lab + ":student_files)")) {
    files.push_back(SplitLabel(l).second);
  }
  return files;
}

std::map<std::string, std::vector<std::string>> StudentFilesOfLabs(const std::string& root,
                                                                   const std::vector<std::string>& labs) {
  std::map<std::string, std::vector<std::string>> out;
  if (labs.empty()) return out;
  std::string set;
  for (const auto& lab : labs) set += (set.empty() ? "" : " + ") + ("//labs/" + lab + ":student_files");
  // A lab's :student_files are files of its own package, so each label's package names its lab.
  for (const auto& l : BazelQuery(root, "labels(srcs, " + set + ")")) {
    const auto [pkg, file] = SplitLabel(l);
    if (pkg.rfind("labs/", 0) == 0) out[pkg.substr(5)].push_back(file);
  }
  return out;
}

std::vector<std::string> PriorFiles(const std::string& root, const std::string& lab) {
  std::vector<std::string> files;
  for (const auto& l : BazelQuery(root, "labels(srcs, //labs/" + lab + ":prior_files)")) {
    const auto [pkg, file] = SplitLabel(l);
    if (pkg.rfind("labs/", 0) == 0) files.push_back(pkg.substr(5) + "/" + file);
  }
  return files;
}

std::vector<std::string> GradedTests(const std::string& root, const std::string& lab) {
  std::vector<std::string> tests;
  for (const auto& l : BazelQuery(root, "attr(tags, '[\\[ ]graded[,\\]]', //tests/" + lab + ":all)")) {
    tests.push_back(SplitLabel(l).second);
  }
  std::sort(tests.begin(), tests.end());
  return tests;
}

std::string BazelBin(const std::string& dir, const std::string& config,
                     const std::vector<std::string>& startup) {
  Command c;
  c.argv = {"bazel"};
  c.argv.insert(c.argv.end(), startup.begin(), startup.end());
  c.argv.insert(c.argv.end(), {"info", "--config=" + config, "bazel-bin"});
  c.cwd = dir;
  c.err = Sink::Null();
  WaitOptions w;
  w.stop_signal = SIGINT;
  int status = 0;
  std::string out = Capture(c, &status, w);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (status != 0 || out.empty()) throw std::runtime_error("bazel info bazel-bin failed in " + dir);
  return out;
}

}  // namespace distlab::grader
