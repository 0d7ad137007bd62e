// selfcheck: the grader's self-check (./labctl grade-selfcheck [LAB], the last phase of ./labctl test;
// testdata/README.md describes the cheats, README.md is the threat model they test). On one lab with
// solutions and hidden tests, it grades with :grade (beside this program, as labctl's grade runs it):
//   1. the solution files, flat (full marks; the seed it was given is the one results.json records);
//   2. the stubs, mirrored (zero);
//   3. the cheats of testdata/cheats/in_case, all in one submission, cheat i touching case i of the lab's
//   first
//      graded test (that case zero, every other full marks), the symbol rules reporting instead of refusing;
//   4. each cheat of testdata/cheats/before_main alone (every case zero, quickly);
//   5. `labctl grade` itself stopped by SIGTERM to its process group while its cases hang (exit status 143,
//      results.json says so);
//   6. the cheats the symbol rules refuse, in one submission (refused, each named);
//   7. a smuggled test file and BUILD file beside the solution (ignored: full marks);
//   8. compile-time reads of hidden sources (refused);
//   9. as root: the grading user cannot read the hidden tests, and after every grading it has no process left
//      (ps -u) and no file in /tmp, /var/tmp or /dev/shm.
// Each result is checked with `gates results`. Prints the table on stderr and, last on stdout,
// "N passed, N failed, 0 skipped"; exit status 1 when a check failed.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"
#include "tools/grader/checkout.h"
#include "tools/grader/process.h"
#include "tools/grader/seed.h"
#include "tools/grader/sweep.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace distlab::grader;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string root, handout, tree, user, lab, tools;
};

void Say(const std::string& what) { std::fprintf(stderr, "[labctl] %s\n", what.c_str()); }

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The value of a fixture's "// key: value" header line ("" when it has none).
std::string Header(const std::string& key, const fs::path& file) {
  std::istringstream in(ReadFile(file));
  const std::string prefix = "// " + key + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) {
      const size_t b = line.find_first_not_of(' ', prefix.size());
      return b == std::string::npos ? "" : line.substr(b);
    }
  }
  return "";
}

std::vector<fs::path> Glob(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Stem(const fs::path& cheat) {  // fork_bomb.cc.in -> fork_bomb
  std::string n = cheat.filename().string();
  return n.substr(0, n.find('.'));
}

void Write(const fs::path& p, const std::string& text, bool append = false) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, append ? std::ios::app : std::ios::trunc);
  f << text;
}

class SelfCheck {
 public:
  explicit SelfCheck(Options o) : o_(std::move(o)) {}
  int Run();

 private:
  void Row(const std::string& name, const std::string& expect, bool ok, const std::string& detail) {
    (ok ? passed_ : failed_) += 1;
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%-34s %-8s %-8s %s", name.c_str(), expect.c_str(), ok ? "ok" : "FAILED",
                  detail.c_str());
    rows_.push_back(buf);
  }
  // One results.json against what is expected (gates results).
  void CheckRow(const std::string& name, const std::string& expect, const fs::path& results,
                const std::vector<std::string>& args = {}) {
    Command c;
    c.argv = {tools_ + "/gates", "results", "--results", results.string(), "--expect", expect};
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    c.err = Sink::ToStdout();
    int status = 0;
    std::string out = Capture(c, &status);
    if (status == 0) out = out.substr(0, out.find('\n'));
    std::replace(out.begin(), out.end(), '\n', ' ');
    Row(name, expect, status == 0, out);
  }
  // Processes of the grading user, and its files in the shared temporary folders.
  std::pair<int, int> LeftBehind() const {
    if (::geteuid() != 0) return {0, 0};
    struct passwd* pw = ::getpwnam(o_.user.c_str());
    if (pw == nullptr) return {0, 0};
    const int n = static_cast<int>(ProcessesOfUser(pw->pw_uid).size());
    int f = 0;
    for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        struct stat st;
        if (::lstat(e.path().c_str(), &st) == 0 && st.st_uid == pw->pw_uid) ++f;
      }
    }
    return {n, f};
  }
  void Leftovers(const std::string& name) {
    const auto [n, f] = LeftBehind();
    if (n != 0 || f != 0) {
      Row("left behind: " + name, "none", false,
          std::to_string(n) + " process(es), " + std::to_string(f) + " file(s) of " + o_.user);
    }
  }
  // The common arguments of every grading.
  std::vector<std::string> GradeArgs() const {
    return {"--root", o_.root,  "--handout", o_.handout, "--tree",
            o_.tree,  "--user", o_.user,     "--lab",    o_.lab};
  }
  // Grades `dir` as `name` (results in <scratch>/<name>.json) with :grade; its output goes to stderr.
  void GradeOne(const std::string& name, const fs::path& dir, const std::vector<std::string>& extra = {}) {
    Command c;
    c.argv = {tools_ + "/grade", "--submission", dir.string(), "--out", (sc_ / (name + ".json")).string(),
              "--keep-server"};
    const auto common = GradeArgs();
    c.argv.insert(c.argv.end(), common.begin(), common.end());
    c.argv.insert(c.argv.end(), extra.begin(), extra.end());
    distlab::grader::Run(c);
    Leftovers(name);
  }
  // A submission folder holding the solution's files (flat).
  fs::path SolutionCopy(const std::string& name) {
    const fs::path d = sc_ / name;
    fs::create_directories(d);
    for (const auto& f : files_) {
      fs::copy_file(fs::path(o_.root) / "solutions" / o_.lab / f, d / f,
                    fs::copy_options::overwrite_existing);
    }
    return d;
  }
  std::string Fixture(const fs::path& cheat, const std::string& case_name) const {
    return Replace(Replace(Replace(ReadFile(cheat), "@CASE@", case_name), "@LAB@", o_.lab), "@ONE@", one_);
  }

  void Solution();
  void Stubs();
  void InCase();
  void BeforeMain();
  void StoppedBySigterm();
  void Symbols();
  void Smuggled();
  void Scan();
  void Permissions();

  Options o_;
  std::string tools_, one_, first_;
  fs::path sc_, fixtures_;
  std::vector<std::string> files_, cases_, rows_;
  int passed_ = 0, failed_ = 0;
};

// 1. the solution files (flat layout) score full marks, under the seed they were given.
void SelfCheck::Solution() {
  const fs::path d = SolutionCopy("solution");
  const std::string seed = std::to_string(FreshSeed());
  GradeOne("solution", d, {"--seed", seed});
  CheckRow("solution files", "full", sc_ / "solution.json", {"--output-contains", "--seed " + seed});
  json r = json::parse(ReadFile(sc_ / "solution.json"), nullptr, false);
  const bool ok = r.is_object() && r.contains("seed") && r["seed"].is_number_unsigned() &&
                  std::to_string(r["seed"].get<uint64_t>()) == seed;
  Row("seed recorded", "seed", ok,
      "seed " + seed +
          (ok ? " in results.json (\"seed\", and its output's first line)" : ": not in results.json"));
}

// 2. the stubs (mirrored layout) score 0.
void SelfCheck::Stubs() {
  const fs::path d = sc_ / "stubs" / "labs" / o_.lab;
  fs::create_directories(d);
  for (const auto& f : files_) {
    fs::copy_file(fs::path(o_.root) / "labs" / o_.lab / f, d / f, fs::copy_options::overwrite_existing);
  }
  GradeOne("stubs", sc_ / "stubs");
  CheckRow("stubs", "zero", sc_ / "stubs.json");
}

// 3. cheats inside cases, in one submission: cheat i touches case i; every other case keeps full marks. The
//    symbol rules only report (each would be refused too: checked below), cases run one at a time.
void SelfCheck::InCase() {
  const fs::path d = SolutionCopy("in_case");
  std::vector<std::string> touched;
  std::vector<fs::path> cheats;
  size_t i = 0;
  for (const auto& cheat : Glob(fixtures_ / "cheats/in_case", ".cc.in")) {
    if (i + 1 >= cases_.size()) {
      Row("cheats in cases", "fit", false, "more cheats than cases of " + one_);
      break;
    }
    Write(d / first_, Fixture(cheat, cases_[i]), /*append=*/true);
    touched.insert(touched.end(), {"--case", cases_[i]});
    cheats.push_back(cheat);
    ++i;
  }
  GradeOne("in_case", d, {"--only", one_, "--case-timeout", "8", "--symbol-rules", "report", "--jobs", "1"});
  for (i = 0; i < cheats.size(); ++i) {
    std::vector<std::string> args = touched;
    args.insert(args.end(), {"--reason", cases_[i] + "=" + Header("reason", cheats[i])});
    const std::string symbols = Header("symbols", cheats[i]);
    if (!symbols.empty()) args.insert(args.end(), {"--output-contains", symbols});
    CheckRow("cheat: " + Stem(cheats[i]), "touched", sc_ / "in_case.json", args);
  }
}

// 4. cheats before main(), each alone: every case scores 0, fast (the blocked submission is recognised).
void SelfCheck::BeforeMain() {
  for (const auto& cheat : Glob(fixtures_ / "cheats/before_main", ".cc.in")) {
    const std::string name = Stem(cheat);
    const fs::path d = SolutionCopy(name);
    Write(d / first_, Fixture(cheat, cases_[0]), /*append=*/true);
    const auto t1 = Clock::now();
    GradeOne(name, d, {"--only", one_, "--case-timeout", "8", "--symbol-rules", "report"});
    std::vector<std::string> args = {"--reason", "*=" + Header("reason", cheat)};
    const std::string symbols = Header("symbols", cheat);
    if (!symbols.empty()) args.insert(args.end(), {"--output-contains", symbols});
    CheckRow("cheat: " + name, "zero", sc_ / (name + ".json"), args);
    if (name == "hang_before_first_test") {
      Say("self-check: a submission that hangs before main graded in " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t1).count()) + " s");
    }
  }
}

// 5. `labctl grade` stopped from outside (SIGTERM to its process group, as timeout(1) sends it) while its
// cases
//    hang: it exits 143, results.json says so, nothing is left running.
void SelfCheck::StoppedBySigterm() {
  const fs::path d = sc_ / "hang_before_first_test";
  if (!fs::is_directory(d)) return;
  const fs::path log = sc_ / "stopped.log";
  Command c;
  c.argv = {(fs::path(o_.root) / "labctl").string(),
            "grade",
            "--submission",
            d.string(),
            "--lab",
            o_.lab,
            "--out",
            (sc_ / "stopped.json").string(),
            "--only",
            one_,
            "--keep-server"};
  c.cwd = o_.root;
  c.out = c.err = Sink::File(log.string());
  c.new_session = true;
  std::string error;
  const pid_t pid = Start(c, &error);
  if (pid < 0) {
    Row("stopped by SIGTERM: exit status", "143", false, error);
    return;
  }
  for (int i = 0; i < 1800 && ReadFile(log).find("grade: running the cases") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ::kill(-pid, SIGTERM);
  const int rc = Wait(pid).status;
  Row("stopped by SIGTERM: exit status", "143", rc == 143, "exit status " + std::to_string(rc));
  CheckRow("stopped by SIGTERM: results", "zero", sc_ / "stopped.json",
           {"--output-contains", "stopped from outside (SIGTERM)"});
  Leftovers("stopped grading");
}

// 6. cheats the symbol rules refuse, in one submission: refused before anything links, each named.
void SelfCheck::Symbols() {
  const fs::path d = SolutionCopy("symbols");
  const auto cheats = Glob(fixtures_ / "cheats/symbols", ".cc.in");
  for (const auto& cheat : cheats) Write(d / first_, Fixture(cheat, ""), /*append=*/true);
  GradeOne("symbols", d, {"--only", one_});
  for (const auto& cheat : cheats) {
    CheckRow("refused: " + Stem(cheat), "zero", sc_ / "symbols.json",
             {"--output-contains", "REFUSED", "--output-contains", Header("symbols", cheat)});
  }
}

// 7. smuggled files: a test file and a BUILD file next to the solution are ignored (full marks).
void SelfCheck::Smuggled() {
  const fs::path d = sc_ / "smuggled", labs = d / "labs" / o_.lab, tests = d / "tests" / o_.lab;
  fs::create_directories(labs);
  fs::create_directories(tests);
  for (const auto& f : files_) {
    fs::copy_file(fs::path(o_.root) / "solutions" / o_.lab / f, labs / f,
                  fs::copy_options::overwrite_existing);
  }
  const fs::path build = fixtures_ / "smuggled/BUILD.smuggled",
                 pass = fixtures_ / "smuggled/always_pass_test.cc";
  fs::copy_file(build, labs / "BUILD", fs::copy_options::overwrite_existing);
  fs::copy_file(build, tests / "BUILD", fs::copy_options::overwrite_existing);
  fs::copy_file(pass, tests / (one_ + ".cc"), fs::copy_options::overwrite_existing);
  fs::copy_file(pass, labs / "extra_test.cc", fs::copy_options::overwrite_existing);
  GradeOne("smuggled", d, {"--only", one_});
  CheckRow("smuggled test + BUILD", "full", sc_ / "smuggled.json",
           {"--output-contains", "Ignored (not student-editable files of lab " + o_.lab + "): "});
}

// 8. compile-time reads of hidden sources are refused (score 0, nothing built).
void SelfCheck::Scan() {
  for (const auto& cheat : Glob(fixtures_ / "scan", ".cc.in")) {
    const std::string name = Stem(cheat);
    const fs::path d = SolutionCopy(name);
    Write(d / first_, Fixture(cheat, "") + ReadFile(d / first_));
    GradeOne(name, d, {"--only", one_});
    CheckRow("refused: " + name, "zero", sc_ / (name + ".json"), {"--output-contains", "REFUSED"});
  }
}

// 9. the unprivileged user cannot read the hidden tests (checkout and grading tree); nothing of it is left.
void SelfCheck::Permissions() {
  if (::geteuid() != 0) return;
  struct passwd* pw = ::getpwnam(o_.user.c_str());
  bool ok = pw != nullptr;
  for (const fs::path& src :
       {fs::path(o_.root) / "tests" / o_.lab / "BUILD", fs::path(o_.tree) / "tests" / o_.lab / "BUILD"}) {
    if (pw == nullptr) break;
    const pid_t pid = ::fork();
    if (pid == 0) {  // as the grading user, as runuser would: its groups, its group, its user
      if (::initgroups(pw->pw_name, pw->pw_gid) != 0 || ::setgid(pw->pw_gid) != 0 ||
          ::setuid(pw->pw_uid) != 0) {
        ::_exit(2);
      }
      ::_exit(::access(src.c_str(), R_OK) == 0 ? 0 : 1);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 1) {
      ok = false;
      Say(o_.user + " CAN READ " + src.string());
    }
  }
  Row("hidden sources unreadable", "denied", ok, "as " + o_.user);
  const auto [n, f] = LeftBehind();
  Row("left after all gradings", "none", n == 0 && f == 0,
      std::to_string(n) + " process(es) of " + o_.user + " (ps -u), " + std::to_string(f) +
          " file(s) in /tmp, /var/tmp, /dev/shm");
}

int SelfCheck::Run() {
  tools_ = o_.tools.empty() ? ExeDir() : o_.tools;
  fixtures_ = fs::path(o_.root) / "tools/grader/testdata";
  files_ = StudentFiles(o_.root, o_.lab);
  // The cheats go into the smallest solution file: each cheat submission recompiles only that one.
  std::vector<std::pair<uintmax_t, std::string>> sizes;
  for (const auto& f : files_)
    sizes.push_back({fs::file_size(fs::path(o_.root) / "solutions" / o_.lab / f), f});
  std::sort(sizes.begin(), sizes.end());
  if (sizes.empty()) throw std::runtime_error("lab " + o_.lab + " has no student files");
  first_ = sizes[0].second;
  const std::vector<std::string> graded = GradedTests(o_.root, o_.lab);
  if (graded.empty()) throw std::runtime_error("lab " + o_.lab + " has no graded tests");
  one_ = graded[0];
  Command build;
  build.argv = {"bazel", "build"};
  build.argv.insert(build.argv.end(), kBazelFlags.begin(), kBazelFlags.end());
  build.argv.insert(build.argv.end(), {"--config=solution", "//tests/" + o_.lab + ":" + one_ + "_manifest"});
  build.cwd = o_.root;
  build.out = build.err = Sink::Null();
  distlab::grader::Run(build);
  const json m = json::parse(
      ReadFile(BazelBin(o_.root, "solution") + "/tests/" + o_.lab + "/" + one_ + ".manifest.json"));
  for (const auto& [c, points] : m.at("cases").items()) cases_.push_back(c);
  if (cases_.empty()) throw std::runtime_error("no cases in the manifest of " + one_);
  char tmpl[] = "/tmp/distlab-selfcheck.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  sc_ = tmpl;
  Say("grader self-check on lab " + o_.lab + ": cheats graded on " + one_ + " (" +
      std::to_string(cases_.size()) + " cases), appended to " + first_);

  Solution();
  Stubs();
  InCase();
  BeforeMain();
  StoppedBySigterm();
  Symbols();
  Smuggled();
  Scan();
  Permissions();

  Command shutdown;
  shutdown.argv = {"bazel", "--max_idle_secs=600", "shutdown"};
  shutdown.cwd = o_.tree;
  shutdown.out = shutdown.err = Sink::Null();
  distlab::grader::Run(shutdown);
  std::error_code ec;
  fs::remove_all(sc_, ec);
  const std::string hr(84, '-');
  std::fprintf(stderr, "%s\n%-34s %-8s %-8s %s\n%s\n", hr.c_str(), "grader self-check", "expect", "result",
               "detail", hr.c_str());
  for (const auto& r : rows_) std::fprintf(stderr, "%s\n", r.c_str());
  std::fprintf(stderr, "%s\n", hr.c_str());
  std::printf("%d passed, %d failed, 0 skipped\n", passed_, failed_);
  return failed_ == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  distlab::cli::App app{
      "The grader's self-check: solution, stubs and cheats graded with :grade (README.md)."};
  app.add_option("--root", o.root, "the course checkout")->required();
  app.add_option("--handout", o.handout, "the handout made from it (labctl's make_handout)")->required();
  app.add_option("--tree", o.tree, "the grading tree")->required();
  app.add_option("--user", o.user, "the grading user (as root)")->required();
  app.add_option("--lab", o.lab, "the lab with solutions and hidden tests to check on")->required();
  app.add_option("--tools", o.tools, "where :grade, :gates and the rest are (default: beside this one)");
  DISTLAB_CLI_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    SelfCheck s(std::move(o));
    return s.Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[labctl] error: self-check: %s\n", e.what());
    std::printf("0 passed, 1 failed, 0 skipped\n");
    return 1;
  }
}
