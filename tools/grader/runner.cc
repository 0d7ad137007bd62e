// runner: runs the cases of one GoogleTest binary, each in its own child process, and decides each verdict
// itself.
//
// A case passes only when all three hold:
//   1. the child sent "PASS <case>" over the record pipe (tools/testing/gtest_main.cc writes it from a
//      GoogleTest listener after the case ended, so exit/_exit/abort/hangs before that point leave no
//      record),
//   2. the child exited normally with status 0 (a FAIL record followed by an atexit hook that rewrites the
//      status to 0 still fails: the FAIL record wins, and a PASS needs both),
//   3. the case is one the caller expected (--manifest or --case), so extra cases a binary adds score
//   nothing.
// stdout, stderr and XML files are never read for the verdict; they are only kept (capped) for the report.
//
// Each child runs in its own process group, killed as a whole when the case times out or when it exits, with
// a private temporary directory; when the runner is root and --user is given, the child drops to that user
// first.
//
// Output: a JSON report (--json) and one progress line per case on stderr; the last stdout line is
//   "<passed> passed, <failed> failed, <skipped> skipped".
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Options {
  std::string binary;
  std::string manifest;
  std::vector<std::string> cases;
  double timeout_s = 0;       // 0: from the manifest (or 60)
  double grace_s = 5;         // the in-process watchdog gets this long to report before the group is killed
  size_t output_cap = 10240;  // bytes of output kept per case
  std::string user;           // drop to this user when running as root
  std::string workdir;        // child's working directory ("" = the binary's runfiles or its directory)
  std::string json_out;
  bool fail_fast = false;
  int jobs = 1;
  std::string label;         // shown in progress lines
  std::string show = "all";  // which verdicts get a progress line: all | failed | passed | none
};

struct CaseResult {
  std::string name;
  std::string status;  // passed | failed | skipped
  std::string reason;  // why it failed, in words
  std::string record;  // PASS | FAIL | SKIP | "" (none)
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  std::string output;
  size_t output_dropped = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Keeps the first `cap` bytes of a stream and counts the rest.
struct CappedBuffer {
  size_t cap;
  std::string data;
  size_t dropped = 0;
  void Append(const char* p, size_t n) {
    size_t room = data.size() < cap ? cap - data.size() : 0;
    size_t take = std::min(room, n);
    data.append(p, take);
    dropped += n - take;
  }
};

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

struct DropTo {
  bool active = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
};

[[noreturn]] void ChildFail(const char* what) {
  // Only async-signal-safe calls between fork and exec.
  ssize_t ignored = ::write(2, what, std::strlen(what));
  (void)ignored;
  ::_exit(127);
}

CaseResult RunCase(const Options& opt, const std::string& name, double timeout_s, const DropTo& drop,
                   const std::string& tmp_root) {
  CaseResult r;
  r.name = name;
  int rec[2], out[2];
  if (::pipe2(rec, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    r.status = "failed";
    r.reason = "runner: pipe failed";
    return r;
  }
  // A private temporary directory per case, owned by the user the case runs as.
  std::string tmp = tmp_root + "/case.XXXXXX";
  std::vector<char> tmpbuf(tmp.begin(), tmp.end());
  tmpbuf.push_back('\0');
  if (::mkdtemp(tmpbuf.data()) == nullptr) {
    r.status = "failed";
    r.reason = "runner: mkdtemp failed";
    return r;
  }
  tmp = tmpbuf.data();
  if (drop.active && ::chown(tmp.c_str(), drop.uid, drop.gid) != 0) {
    r.status = "failed";
    r.reason = "runner: chown of the case's temporary directory failed";
    return r;
  }

  // Everything the child needs is prepared before fork (no allocation afterwards).
  std::string filter = "--gtest_filter=" + name;
  std::string fd_env = "DISTLAB_RECORD_FD=" + std::to_string(rec[1]);
  std::string timeout_env = "DISTLAB_CASE_TIMEOUT_S=" + std::to_string(static_cast<int>(timeout_s + 0.5));
  std::string tmp_env = "TMPDIR=" + tmp;
  std::string home_env =
      "HOME=" + (drop.active ? tmp : std::string(std::getenv("HOME") ? std::getenv("HOME") : tmp));
  std::vector<std::string> env_strings = {
      fd_env, timeout_env, tmp_env, home_env, "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "GTEST_COLOR=no"};
  for (const char* keep : {"DISTLAB_TIMEOUT_SCALE", "DISTLAB_SANITIZER", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                           "TSAN_OPTIONS", "DISTLAB_BACKEND", "CUDA_VISIBLE_DEVICES"}) {
    if (const char* v = std::getenv(keep)) env_strings.push_back(std::string(keep) + "=" + v);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string bin = opt.binary;
  std::vector<char*> argv = {bin.data(), filter.data(), nullptr};
  std::string workdir = opt.workdir;

  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    r.status = "failed";
    r.reason = "runner: fork failed";
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    // The record pipe's write end must survive exec: dup it onto the number the environment names.
    ::fcntl(rec[1], F_SETFD, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (!workdir.empty() && ::chdir(workdir.c_str()) != 0) ChildFail("runner: chdir failed\n");
    if (drop.active) {
      if (::setgroups(0, nullptr) != 0) ChildFail("runner: setgroups failed\n");
      if (::setgid(drop.gid) != 0) ChildFail("runner: setgid failed\n");
      if (::setuid(drop.uid) != 0) ChildFail("runner: setuid failed\n");
      if (::setuid(0) == 0) ChildFail("runner: could not drop root\n");
    }
    ::execve(argv[0], argv.data(), envp.data());
    ChildFail("runner: exec failed\n");
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  ::close(rec[1]);
  ::close(out[1]);
  SetNonBlocking(rec[0]);
  SetNonBlocking(out[0]);

  CappedBuffer output{opt.output_cap};
  std::string records;
  bool rec_open = true, out_open = true, exited = false;
  int wstatus = 0;
  auto deadline = start + std::chrono::milliseconds(static_cast<long long>((timeout_s + opt.grace_s) * 1000));
  Clock::time_point drain_until{};
  char buf[8192];
  while (true) {
    if (!exited) {
      pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
      if (w == pid) {
        exited = true;
        // Whatever the case left behind in its group goes with it; pipes held by escaped grandchildren are
        // drained for one more second at most.
        ::kill(-pid, SIGKILL);
        drain_until = Clock::now() + std::chrono::seconds(1);
      }
    }
    auto now = Clock::now();
    if (!exited && now >= deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      exited = true;
      drain_until = Clock::now() + std::chrono::milliseconds(200);
    }
    if (exited && ((!rec_open && !out_open) || Clock::now() >= drain_until)) break;
    struct pollfd fds[2];
    int nfds = 0;
    if (rec_open) fds[nfds++] = {rec[0], POLLIN, 0};
    if (out_open) fds[nfds++] = {out[0], POLLIN, 0};
    if (nfds > 0) {
      ::poll(fds, nfds, 50);
    } else {
      ::usleep(20000);
    }
    for (bool* fd_open : {&rec_open, &out_open}) {
      if (!*fd_open) continue;
      int fd = fd_open == &rec_open ? rec[0] : out[0];
      for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
          if (fd == rec[0]) {
            if (records.size() < 65536) records.append(buf, static_cast<size_t>(n));
          } else {
            output.Append(buf, static_cast<size_t>(n));
          }
          continue;
        }
        if (n == 0) *fd_open = false;
        break;  // EAGAIN or EOF
      }
    }
  }
  ::close(rec[0]);
  ::close(out[0]);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.output = std::move(output.data);
  r.output_dropped = output.dropped;
  if (WIFEXITED(wstatus)) r.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) r.signal = WTERMSIG(wstatus);

  // The records: only complete lines naming exactly this case count.
  bool pass = false, fail = false, skip = false;
  std::istringstream lines(records);
  std::string line;
  while (std::getline(lines, line)) {
    if (line == "PASS " + name) pass = true;
    if (line == "FAIL " + name) fail = true;
    if (line == "SKIP " + name) skip = true;
  }
  r.record = fail ? "FAIL" : skip ? "SKIP" : pass ? "PASS" : "";

  std::ostringstream why;
  if (r.timed_out) {
    why << "timed out after " << static_cast<int>(timeout_s + opt.grace_s) << " s (process group killed)";
  } else if (r.signal != 0) {
    why << "crashed: killed by signal " << r.signal << " (" << ::strsignal(r.signal) << ")";
  } else if (fail) {
    why << "the case failed";
    if (r.exit_code == 0) why << " (yet the process exited 0: exit status rewritten, ignored)";
  } else if (r.exit_code != 0) {
    why << "exited with status " << r.exit_code;
    if (!pass && !skip) why << " before the case reported a verdict";
  } else if (!pass && !skip) {
    why << "exited 0 without reporting the case's verdict (exit/_exit before the case ended, or the case "
           "does not exist in this binary)";
  }
  if (fail || r.timed_out || r.signal != 0 || r.exit_code != 0 || (!pass && !skip)) {
    r.status = "failed";
    r.reason = why.str();
  } else if (skip) {
    r.status = "skipped";
  } else {
    r.status = "passed";
  }
  if (r.output_dropped > 0) {
    r.output += "\n[runner: " + std::to_string(r.output_dropped) + " more bytes of output dropped]\n";
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Runs each case of a GoogleTest binary in its own process and decides its verdict."};
  app.add_option("--binary", opt.binary, "the test binary")->required()->check(CLI::ExistingFile);
  app.add_option("--manifest", opt.manifest, "the graded test's manifest (expected cases, timeout)");
  app.add_option("--case", opt.cases, "an expected case (repeatable; adds to the manifest's)");
  app.add_option("--timeout", opt.timeout_s, "per-case timeout in seconds (default: manifest's, else 60)");
  app.add_option("--grace", opt.grace_s, "seconds past the timeout before the group is killed");
  app.add_option("--output-cap", opt.output_cap, "bytes of output kept per case");
  app.add_option("--user", opt.user, "when root, run the cases as this user");
  app.add_option("--workdir", opt.workdir, "the cases' working directory");
  app.add_option("--json", opt.json_out, "write the report here");
  app.add_flag("--fail-fast", opt.fail_fast, "stop at the first case that does not pass");
  app.add_option("--jobs", opt.jobs, "cases run at the same time")->check(CLI::Range(1, 64));
  app.add_option("--label", opt.label, "name shown in progress lines");
  app.add_option("--show", opt.show, "which cases get a progress line")
      ->check(CLI::IsMember({"all", "failed", "passed", "none"}));
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> expected;
  double timeout_s = 60;
  if (!opt.manifest.empty()) {
    json m;
    try {
      m = json::parse(ReadFile(opt.manifest));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "runner: bad manifest %s: %s\n", opt.manifest.c_str(), e.what());
      return 2;
    }
    for (auto& [c, pts] : m.at("cases").items()) expected.push_back(c);
    if (m.contains("timeout_s")) timeout_s = m["timeout_s"].get<double>();
  }
  for (auto& c : opt.cases) expected.push_back(c);
  if (opt.timeout_s > 0) timeout_s = opt.timeout_s;
  if (expected.empty()) {
    std::fprintf(stderr, "runner: no expected cases (give --manifest or --case)\n");
    return 2;
  }
  if (opt.label.empty()) opt.label = opt.binary.substr(opt.binary.rfind('/') + 1);

  // An absolute binary path, and a working directory: the runfiles tree if there is one.
  if (opt.binary[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) != nullptr) opt.binary = std::string(cwd) + "/" + opt.binary;
  }
  if (opt.workdir.empty()) {
    struct stat st;
    std::string rf = opt.binary + ".runfiles/distlab";
    opt.workdir = ::stat(rf.c_str(), &st) == 0 ? rf : opt.binary.substr(0, opt.binary.rfind('/'));
  }

  DropTo drop;
  if (!opt.user.empty() && ::geteuid() == 0) {
    struct passwd* pw = ::getpwnam(opt.user.c_str());
    if (pw == nullptr) {
      std::fprintf(stderr, "runner: no such user %s (./labctl setup creates it)\n", opt.user.c_str());
      return 2;
    }
    drop = {true, pw->pw_uid, pw->pw_gid, pw->pw_dir};
  } else if (!opt.user.empty()) {
    std::fprintf(stderr, "runner: not root, so the cases run as the current user (not %s)\n",
                 opt.user.c_str());
  }

  char tmpl[] = "/tmp/distlab-runner.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("runner: mkdtemp");
    return 2;
  }
  std::string tmp_root = tmpl;
  ::chmod(tmp_root.c_str(), 0711);

  std::vector<CaseResult> results(expected.size());
  // One flag per case, each set by the worker that ran it. Not std::vector<bool>: its bits share words, so
  // two workers setting neighbouring flags at once could lose one, and that case would silently go uncounted.
  std::vector<char> ran(expected.size(), 0);
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex print_mu;
  auto worker = [&] {
    for (;;) {
      if (stop.load()) return;
      size_t i = next.fetch_add(1);
      if (i >= expected.size()) return;
      results[i] = RunCase(opt, expected[i], timeout_s, drop, tmp_root);
      ran[i] = 1;
      if (results[i].status == "failed" && opt.fail_fast) stop = true;
      if (opt.show == "all" || opt.show == results[i].status) {
        std::lock_guard<std::mutex> lock(print_mu);
        std::fprintf(stderr, "  %-7s %s %s  (%.1f s)%s%s\n", results[i].status.c_str(), opt.label.c_str(),
                     expected[i].c_str(), results[i].seconds, results[i].reason.empty() ? "" : ": ",
                     results[i].reason.c_str());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < opt.jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::string rm = "rm -rf '" + tmp_root + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "runner: could not remove %s\n", tmp_root.c_str());

  int passed = 0, failed = 0, skipped = 0, not_run = 0;
  json cases = json::array();
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!ran[i]) {
      ++not_run;
      cases.push_back({{"name", expected[i]}, {"status", "not_run"}, {"reason", "not run (fail-fast)"}});
      continue;
    }
    const CaseResult& r = results[i];
    if (r.status == "passed") ++passed;
    if (r.status == "failed") ++failed;
    if (r.status == "skipped") ++skipped;
    cases.push_back({{"name", r.name},
                     {"status", r.status},
                     {"reason", r.reason},
                     {"record", r.record},
                     {"exit_code", r.exit_code},
                     {"signal", r.signal},
                     {"timed_out", r.timed_out},
                     {"seconds", r.seconds},
                     {"output", json(r.output).dump(-1, ' ', false, json::error_handler_t::replace)}});
    // (output stored as a JSON-escaped string of possibly invalid UTF-8: replaced, never rejected)
    cases.back()["output"] = json::parse(cases.back()["output"].get<std::string>());
  }
  json report = {
      {"binary", opt.binary}, {"manifest", opt.manifest}, {"timeout_s", timeout_s}, {"passed", passed},
      {"failed", failed},     {"skipped", skipped},       {"not_run", not_run},     {"cases", cases}};
  if (!opt.json_out.empty()) {
    std::ofstream f(opt.json_out);
    f << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return 0;
}
