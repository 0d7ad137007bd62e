// One graded case: start it under case_init, collect what it says, judge it (see case_runner.h).
#include "tools/grader/case_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "nlohmann/json.hpp"
#include "tools/grader/seed.h"

namespace distlab::grader {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr int kNamespaceFlags = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;

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

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buf) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

unsigned RandomBelow(unsigned n) {
  unsigned v = 0;
  while (::getrandom(&v, sizeof v, 0) != sizeof v) {
  }
  return n == 0 ? 0 : v % n;
}

// What the child of clone()/fork() does before exec: only async-signal-safe calls (the runner has threads).
struct ChildArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  int src[5];  // become fds 0..4
};

int ChildMain(void* p) {
  auto* a = static_cast<ChildArgs*>(p);
  int tmp[5];
  for (int i = 0; i < 5; ++i) tmp[i] = ::fcntl(a->src[i], F_DUPFD_CLOEXEC, 100);
  for (int i = 0; i < 5; ++i) {
    if (tmp[i] < 0 || ::dup2(tmp[i], i) < 0) ::_exit(126);
  }
  ::syscall(SYS_close_range, 5u, ~0u, 0u);
  ::setpgid(0, 0);  // a Ctrl-C on the terminal goes to the runner, which stops the cases itself
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(a->path, a->argv, a->envp);
  ::_exit(127);
}

// Starts case_init with fds 0..4 = src; in fresh namespaces when asked. Returns its pid, or -1 with `error`.
pid_t SpawnInit(const std::string& init, const std::vector<std::string>& args, bool namespaces,
                const int src[5], std::string* error) {
  std::vector<std::string> argv_s = {init};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/bin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  ChildArgs a{init.c_str(), argv.data(), envp, {src[0], src[1], src[2], src[3], src[4]}};
  pid_t pid;
  if (namespaces) {
    const size_t stack_size = 256 * 1024;
    void* stack =
        ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
      *error = std::string("mmap of a clone stack: ") + std::strerror(errno);
      return -1;
    }
    pid = ::clone(ChildMain, static_cast<char*>(stack) + stack_size, kNamespaceFlags | SIGCHLD, &a);
    const int saved = errno;
    ::munmap(stack, stack_size);  // the child has its own copy of the address space
    if (pid < 0) {
      *error =
          std::string("clone(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS): ") +
          std::strerror(saved);
    }
  } else {
    pid = ::fork();
    if (pid == 0) ChildMain(&a);
    if (pid < 0) *error = std::string("fork: ") + std::strerror(errno);
  }
  return pid;
}

struct Pipe {
  int r = -1, w = -1;
  bool Open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    r = fds[0];
    w = fds[1];
    return true;
  }
  void CloseR() {
    if (r >= 0) ::close(r);
    r = -1;
  }
  void CloseW() {
    if (w >= 0) ::close(w);
    w = -1;
  }
  ~Pipe() {
    CloseR();
    CloseW();
  }
};

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string Cap(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f" : "%.0f", s);
  return buf;
}

bool Contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// The in-process watchdog's line (tools/testing/gtest_main.cc), without its tag.
std::string WatchdogLine(const std::string& output) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[ TIMEOUT  ] ", 0) == 0) return Trim(line.substr(13));
  }
  return "";
}

// The limit a failed case ran into, in words ("" when none is recognised).
std::string LimitHit(const Limits& l, const Observation& o) {
  std::vector<std::string> hits;
  if (o.signal == SIGXCPU || (o.signal == SIGKILL && l.cpu_seconds > 0 && o.cpu_s >= l.cpu_seconds)) {
    hits.push_back("exceeded the limit of " + std::to_string(l.cpu_seconds) + " CPU seconds");
  }
  if (o.signal == SIGXFSZ) {
    hits.push_back("exceeded the file size limit of " + std::to_string(l.file_size_mb) + " MiB");
  }
  if (l.address_space_mb > 0 &&
      (o.vm_peak_mb >= 0.9 * static_cast<double>(l.address_space_mb) ||
       Contains(o.output, "std::bad_alloc") || Contains(o.output, "Cannot allocate memory"))) {
    std::string amount = l.address_space_mb % 1024 == 0 ? std::to_string(l.address_space_mb / 1024) + " GiB"
                                                        : std::to_string(l.address_space_mb) + " MiB";
    hits.push_back("exceeded " + amount + " of memory (address space; an allocation failed)");
  }
  if (l.processes > 0 && o.tasks_peak >= static_cast<long long>(0.9 * static_cast<double>(l.processes))) {
    hits.push_back("reached the limit of " + std::to_string(l.processes) + " processes and threads");
  }
  if (l.open_files > 0 && (o.fds_peak >= static_cast<long long>(0.9 * static_cast<double>(l.open_files)) ||
                           Contains(o.output, "Too many open files"))) {
    hits.push_back("reached the limit of " + std::to_string(l.open_files) + " open files");
  }
  std::string out;
  for (const auto& h : hits) out += (out.empty() ? "" : "; ") + h;
  return out;
}

}  // namespace

const char* StatusName(Status s) {
  switch (s) {
    case Status::kPassed:
      return "passed";
    case Status::kFailed:
      return "failed";
    case Status::kSkipped:
      return "skipped";
    case Status::kNotRun:
      return "not_run";
  }
  return "?";
}

const char* CauseName(Cause c) {
  switch (c) {
    case Cause::kNone:
      return "none";
    case Cause::kAssertion:
      return "assertion";
    case Cause::kTimeout:
      return "timeout";
    case Cause::kWatchdog:
      return "watchdog";
    case Cause::kCrash:
      return "crash";
    case Cause::kLimit:
      return "limit";
    case Cause::kExitStatus:
      return "exit_status";
    case Cause::kNoVerdict:
      return "no_verdict";
    case Cause::kTampered:
      return "tampered";
    case Cause::kBlocked:
      return "blocked";
    case Cause::kBudget:
      return "budget";
    case Cause::kStopped:
      return "stopped";
    case Cause::kRunner:
      return "runner";
  }
  return "?";
}

Records ParseRecords(const std::string& bytes, const std::string& key, const std::string& name) {
  Records r;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t nl = bytes.find('\n', pos);
    if (nl == std::string::npos) {
      ++r.foreign;  // a torn last line: nothing the harness writes looks like this
      break;
    }
    const std::string line = bytes.substr(pos, nl - pos);
    pos = nl + 1;
    const std::string prefix = key + " ";
    if (key.empty() || line.rfind(prefix, 0) != 0) {
      ++r.foreign;
      continue;
    }
    const std::string rest = line.substr(prefix.size());
    if (rest == "HELLO") {
      r.hello = true;
    } else if (rest == "START " + name) {
      r.started = true;
    } else if (rest == "PASS " + name) {
      r.pass = true;
    } else if (rest == "FAIL " + name) {
      r.fail = true;
    } else if (rest == "SKIP " + name) {
      r.skip = true;
    } else {
      ++r.foreign;
    }
  }
  return r;
}

std::string FailureExcerpt(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  for (const auto& l : lines) {
    if (Contains(l, "TODO(")) return Cap(Trim(l), 240);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string t = Trim(lines[i]);
    if (t.size() < 9 || t.compare(t.size() - 9, 9, ": Failure") != 0) continue;
    for (size_t j = i + 1; j < lines.size(); ++j) {
      const std::string u = Trim(lines[j]);
      if (u.empty() || u == "Failed") continue;
      return Cap(u, 240);
    }
  }
  return "";
}

CaseResult Decide(const CaseSpec& spec, const Observation& o) {
  CaseResult r;
  r.name = spec.name;
  r.reached_main = o.records.hello;
  r.started = o.records.started;
  r.record = o.records.fail ? "FAIL" : o.records.skip ? "SKIP" : o.records.pass ? "PASS" : "";
  r.exit_code = o.exit_code;
  r.signal = o.signal;
  r.timed_out = o.timed_out;
  r.seconds = o.seconds;
  r.timeout_s = spec.timeout_s;
  r.vm_peak_mb = o.vm_peak_mb;
  r.tasks_peak = o.tasks_peak;
  r.left_running = o.left_running;
  r.output = o.output;
  auto fail = [&](Cause c, std::string why) {
    r.status = Status::kFailed;
    r.cause = c;
    r.reason = std::move(why);
  };
  // Where the process was when it ended, for the reason's words.
  const std::string before_start = !o.records.hello
                                       ? " before main() ran (look at static initializers and global objects)"
                                   : !o.records.started ? " before the case started"
                                                        : "";

  if (o.cut == Cause::kBudget || o.cut == Cause::kStopped) {
    r.status = Status::kNotRun;
    r.cause = o.cut;
    r.reason = o.cut == Cause::kBudget ? "not run: grading time budget spent"
                                       : "not run: the grading was stopped from outside";
    return r;
  }
  if (!o.init_error.empty()) {
    fail(Cause::kRunner, "the grader could not run the case: " + o.init_error);
    return r;
  }
  const std::string limit = LimitHit(spec.limits, o);
  const std::string watchdog = WatchdogLine(o.output);
  if (o.records.foreign > 0) {
    fail(Cause::kTampered, "the record pipe received " + std::to_string(o.records.foreign) +
                               " line(s) the test harness did not write; a forged verdict fails the case");
  } else if (o.timed_out) {
    fail(Cause::kTimeout, "timed out after " + Seconds(spec.timeout_s) + " s" +
                              (before_start.empty() ? std::string(" (the case was killed)") : before_start));
  } else if (!limit.empty() && !(o.records.pass && o.exit_code == 0 && !o.records.fail)) {
    std::string what = limit;
    if (o.records.fail) {
      const std::string excerpt = FailureExcerpt(o.output);
      what += "; the case failed" + (excerpt.empty() ? "" : ": " + excerpt);
    }
    fail(Cause::kLimit, what);
  } else if (o.signal != 0) {
    fail(Cause::kCrash, "crashed: killed by signal " + std::to_string(o.signal) + " (" +
                            ::strsignal(o.signal) + ")" + before_start);
  } else if (o.records.fail) {
    const std::string excerpt = FailureExcerpt(o.output);
    fail(Cause::kAssertion, "the case failed" + (excerpt.empty() ? "" : ": " + excerpt));
  } else if (!watchdog.empty() && !o.records.pass && !o.records.skip) {
    fail(Cause::kWatchdog, "timed out: " + watchdog);
  } else if (o.exit_code != 0) {
    fail(Cause::kExitStatus, "exited with status " + std::to_string(o.exit_code) +
                                 (o.records.pass || o.records.skip ? std::string(" after the case ended")
                                  : o.records.started              ? " before the case reported a verdict"
                                                                   : before_start));
  } else if (!o.records.pass && !o.records.skip) {
    fail(Cause::kNoVerdict, o.records.started ? "exited 0 before the case ended (exit or _exit inside it)"
                                              : "exited 0" + before_start);
  } else if (o.records.skip) {
    r.status = Status::kSkipped;
  } else {
    r.status = Status::kPassed;
  }
  if (r.status == Status::kFailed && o.left_running > 0) {
    r.reason += "; " + std::to_string(o.left_running) +
                " process(es) it started were still running when it ended (all killed)";
  }
  return r;
}

CaseResult RunCase(const CaseSpec& spec, const Environment& env, const std::atomic<int>& cut,
                   Clock::time_point deadline) {
  Observation obs;
  auto runner_fail = [&](const std::string& why) {
    obs.init_error = why;
    return Decide(spec, obs);
  };
  const bool ns = env.isolation == Isolation::kNamespaces;

  // A private temporary directory (subreaper mode; in namespaces mode /tmp itself is private).
  std::string tmp = "/tmp";
  if (!ns) {
    std::string pattern = env.tmp_root + "/case.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) return runner_fail("mkdtemp failed");
    tmp = buf.data();
    if (env.drop && ::chown(tmp.c_str(), env.uid, env.gid) != 0) return runner_fail("chown of " + tmp);
  }

  const std::string key = RandomHex(16);
  long long nofile = spec.limits.open_files > 0 ? spec.limits.open_files : 1024;
  const int record_fd = 10 + static_cast<int>(RandomBelow(static_cast<unsigned>(std::max(1LL, nofile - 11))));
  const char* home = std::getenv("HOME");
  std::vector<std::string> test_env = {
      "DISTLAB_RECORD_FD=" + std::to_string(record_fd),
      "DISTLAB_RECORD_KEY=" + key,
      "DISTLAB_CASE=" + spec.name,
      "DISTLAB_CASE_TIMEOUT_S=" + std::to_string(std::max(1, static_cast<int>(spec.timeout_s + 0.5))),
      "TMPDIR=" + tmp,
      "HOME=" + (env.drop || home == nullptr ? tmp : std::string(home)),
      "PATH=/usr/bin:/bin",
      "LANG=C.UTF-8",
      "GTEST_COLOR=no"};
  if (!env.grading_seed.empty()) test_env.push_back(std::string(kSeedVariable) + "=" + env.grading_seed);
  for (const auto& k : env.keep_env) {
    if (const char* v = std::getenv(k.c_str())) test_env.push_back(k + "=" + v);
  }
  json settings = {{"binary", spec.binary},
                   {"workdir", spec.workdir},
                   {"argv", {spec.binary}},
                   {"env", test_env},
                   {"drop", env.drop},
                   {"uid", env.uid},
                   {"gid", env.gid},
                   {"record_fd", record_fd},
                   {"namespaces", ns},
                   {"tmpfs_mb", spec.limits.tmpfs_mb},
                   {"limits",
                    {{"address_space_mb", spec.limits.address_space_mb},
                     {"processes", spec.limits.processes},
                     {"file_size_mb", spec.limits.file_size_mb},
                     {"open_files", spec.limits.open_files},
                     {"cpu_seconds", spec.limits.cpu_seconds}}}};

  Pipe cfg, out, rec, st;
  if (!cfg.Open() || !out.Open() || !rec.Open() || !st.Open()) return runner_fail("pipe failed");
  WriteAll(cfg.w, settings.dump());  // a few hundred bytes: fits the pipe before anyone reads
  cfg.CloseW();
  const int src[5] = {cfg.r, out.w, out.w, rec.w, st.w};
  std::string error;
  const auto start = Clock::now();
  pid_t pid = SpawnInit(env.case_init, {}, ns, src, &error);
  if (pid < 0) return runner_fail(error);
  cfg.CloseR();
  out.CloseW();
  rec.CloseW();
  st.CloseW();
  for (int fd : {out.r, rec.r, st.r}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  CappedBuffer output{env.output_cap};
  std::string records, status;
  bool out_open = true, rec_open = true, st_open = true, exited = false, term_sent = false;
  int wstatus = 0;
  const auto kill_at =
      start + std::chrono::milliseconds(static_cast<long long>((spec.timeout_s + env.grace_s) * 1000));
  Clock::time_point term_time{}, drain_until{};
  char buf[8192];
  for (;;) {
    if (!exited && ::waitpid(pid, &wstatus, WNOHANG) == pid) {
      exited = true;
      drain_until = Clock::now() + std::chrono::seconds(1);
    }
    const auto now = Clock::now();
    if (!exited && !term_sent) {
      if (now >= kill_at) {
        obs.timed_out = true;
      } else if (cut.load() != 0) {
        obs.cut = static_cast<Cause>(cut.load());
      } else if (now >= deadline) {
        obs.cut = Cause::kBudget;
      }
      if (obs.timed_out || obs.cut != Cause::kNone) {
        ::kill(pid, SIGTERM);  // case_init ends the test and everything it started, then reports
        term_sent = true;
        term_time = now;
      }
    }
    if (term_sent && !exited && now >= term_time + std::chrono::seconds(2)) {
      ::kill(pid, SIGKILL);
      if (!ns) ::kill(-pid, SIGKILL);
    }
    if (exited && ((!out_open && !rec_open && !st_open) || now >= drain_until)) break;
    struct pollfd fds[3];
    int n = 0;
    for (auto [fd, open] : {std::pair{out.r, out_open}, {rec.r, rec_open}, {st.r, st_open}}) {
      if (open) fds[n++] = {fd, POLLIN, 0};
    }
    ::poll(fds, n, 20);
    for (auto [fd, open, sink] :
         {std::tuple{out.r, &out_open, 0}, {rec.r, &rec_open, 1}, {st.r, &st_open, 2}}) {
      while (*open) {
        ssize_t got = ::read(fd, buf, sizeof buf);
        if (got > 0) {
          if (sink == 0) output.Append(buf, static_cast<size_t>(got));
          if (sink == 1 && records.size() < 65536) records.append(buf, static_cast<size_t>(got));
          if (sink == 2 && status.size() < 65536) status.append(buf, static_cast<size_t>(got));
          continue;
        }
        if (got == 0) *open = false;
        break;  // EOF or EAGAIN
      }
    }
  }
  obs.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!ns) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
  }

  obs.records = ParseRecords(records, key, spec.name);
  obs.output = std::move(output.data);
  if (output.dropped > 0) {
    obs.output += "\n[grader: " + std::to_string(output.dropped) + " more bytes of output dropped]\n";
  }
  const std::string line = status.substr(0, status.find('\n'));
  json s = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (s.is_object() && s.contains("error")) {
    obs.init_error = s["error"].get<std::string>();
  } else if (s.is_object()) {
    obs.reported = true;
    obs.exit_code = s.value("exit_code", -1);
    obs.signal = s.value("signal", 0);
    obs.vm_peak_mb = s.value("vm_peak_mb", 0.0);
    obs.tasks_peak = s.value("tasks_peak", 0LL);
    obs.fds_peak = s.value("fds_peak", 0LL);
    obs.cpu_s = s.value("cpu_s", 0.0);
    obs.left_running = s.value("left_running", 0);
  } else if (!obs.timed_out && obs.cut == Cause::kNone) {
    obs.init_error = "case_init ended without a report (wait status " + std::to_string(wstatus) + ")";
  }
  if (obs.timed_out) obs.signal = 0;  // the kill was ours
  return Decide(spec, obs);
}

bool NamespacesWork(const std::string& case_init, std::string* reason) {
  if (::geteuid() != 0) {
    *reason = "not root: cases run without namespaces, under a subreaper that kills what they leave";
    return false;
  }
  Pipe p;
  if (!p.Open()) {
    *reason = "pipe failed";
    return false;
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int src[5] = {devnull, p.w, p.w, devnull, p.w};
  std::string error;
  pid_t pid = SpawnInit(case_init, {"--probe"}, /*namespaces=*/true, src, &error);
  ::close(devnull);
  p.CloseW();
  if (pid < 0) {
    *reason = error;
    return false;
  }
  std::string text;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(p.r, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return true;
  *reason =
      "case_init --probe failed: " + (text.empty() ? "wait status " + std::to_string(wstatus) : Trim(text));
  return false;
}

}  // namespace distlab::grader
