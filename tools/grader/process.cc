// Child processes of the grader's programs (see process.h).
#include "tools/grader/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace distlab::grader {

volatile std::sig_atomic_t g_stop_signal = 0;

namespace {

using Clock = std::chrono::steady_clock;

void OnStop(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}

// In the child, before exec: fd `target` (1 or 2) per the sink. Only async-signal-safe calls.
bool Redirect(const Sink& s, int target) {
  int fd = -1;
  switch (s.kind) {
    case Sink::kInherit:
      return true;
    case Sink::kNull:
      fd = ::open("/dev/null", O_WRONLY);
      break;
    case Sink::kStdout:
      return ::dup2(1, target) >= 0;
    case Sink::kStderr:
      return ::dup2(2, target) >= 0;
    case Sink::kFile:
      fd = ::open(s.path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      break;
  }
  if (fd < 0 || ::dup2(fd, target) < 0) return false;
  if (fd != target) ::close(fd);
  return true;
}

pid_t StartWith(const Command& c, int stdout_pipe, std::string* error) {
  if (c.argv.empty()) {
    *error = "no command";
    return -1;
  }
  std::vector<char*> argv;
  for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid > 0) return pid;
  // The child.
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (c.new_session) ::setsid();
  if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) != 0) {
    std::fprintf(stderr, "cannot enter %s: %s\n", c.cwd.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  if (stdout_pipe >= 0) {
    if (::dup2(stdout_pipe, 1) < 0) ::_exit(127);
  } else if (!Redirect(c.out, 1)) {
    ::_exit(127);
  }
  if (!Redirect(c.err, 2)) ::_exit(127);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// Waits for `pid` as WaitOptions say, reading `read_fd` (when >= 0) into *sink until EOF.
Exit WaitAndRead(pid_t pid, const WaitOptions& w, int read_fd, std::string* sink) {
  Exit e;
  bool exited = false, stop_sent = false, term_sent = false;
  Clock::time_point stop_time{}, term_time{}, drain_until{};
  int st = 0;
  char buf[65536];
  for (;;) {
    if (!exited) {
      const pid_t r = ::waitpid(pid, &st, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) {
        exited = true;
        drain_until = Clock::now() + std::chrono::seconds(1);  // what a grandchild still holds open
      }
    }
    const auto now = Clock::now();
    if (exited && (read_fd < 0 || now >= drain_until)) break;
    if (!exited) {
      if (!term_sent && now >= w.deadline) {
        e.timed_out = true;
        ::kill(pid, w.timeout_signal);
        term_sent = true;
        term_time = now;
      }
      if (!stop_sent && w.stop_signal != 0 && g_stop_signal != 0) {
        if (w.on_stop) w.on_stop();
        ::kill(pid, w.stop_signal);
        stop_sent = true;
        stop_time = now;
      }
      const auto grace = std::chrono::milliseconds(static_cast<long long>(w.kill_after_s * 1000));
      if ((term_sent && now >= term_time + grace) || (stop_sent && now >= stop_time + 2 * grace)) {
        ::kill(pid, SIGKILL);
      }
    }
    if (read_fd >= 0) {
      struct pollfd p = {read_fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = ::read(read_fd, buf, sizeof buf);
      if (n > 0) {
        sink->append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        ::close(read_fd);
        read_fd = -1;
      }
    } else {
      ::usleep(20 * 1000);
    }
  }
  if (read_fd >= 0) ::close(read_fd);
  if (WIFEXITED(st)) e.status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) e.status = 128 + WTERMSIG(st);
  return e;
}

}  // namespace

void InstallStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnStop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  // Also when started in the background by a shell, which starts such commands with SIGINT ignored.
  for (int s : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
  sigset_t stops;
  sigemptyset(&stops);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stops, s);
  ::sigprocmask(SIG_UNBLOCK, &stops, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

pid_t Start(const Command& c, std::string* error) { return StartWith(c, -1, error); }

Exit Wait(pid_t pid, const WaitOptions& w) { return WaitAndRead(pid, w, -1, nullptr); }

Exit Run(const Command& c, const WaitOptions& w) {
  std::string error;
  const pid_t pid = Start(c, &error);
  if (pid < 0) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return {127, false};
  }
  return Wait(pid, w);
}

std::string Capture(const Command& c, int* status, const WaitOptions& w) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *status = 127;
    return "";
  }
  std::string error, out;
  const pid_t pid = StartWith(c, fds[1], &error);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    std::fprintf(stderr, "%s\n", error.c_str());
    *status = 127;
    return "";
  }
  *status = WaitAndRead(pid, w, fds[0], &out).status;
  return out;
}

std::string ExeDir() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : p.parent_path().string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace distlab::grader
