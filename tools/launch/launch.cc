// The process launcher behind `./labctl launch` (README "Running on several processes and machines").
//
//   launch -n N [--backend gloo|nccl|threads] [--nodes K --node-rank R] [--master ADDR:PORT]
//          [--grace SECONDS] -- CMD ARGS...
//
// Starts N copies of CMD on this machine with torchrun's variables: RANK (global: R*N + i), WORLD_SIZE
// (K*N), LOCAL_RANK (i), LOCAL_WORLD_SIZE (N), GROUP_RANK (R), MASTER_ADDR and MASTER_PORT (rank 0 serves
// the rendezvous store there; on one node a free port of 127.0.0.1 by default), and DISTLAB_BACKEND when
// --backend is given. Each output line of a rank is printed as "[rank G] line" (stdout and stderr merged).
//
// Failure: the first rank that exits non-zero or dies by a signal is reported ("rank 2 failed: killed by
// signal 9 (Killed)"); the others get SIGTERM, then SIGKILL after the grace period (default 5 s); the
// launcher exits with that rank's status (128 + signal for a signal). Ctrl-C / SIGTERM: forwarded to every
// rank (a second one sends SIGKILL), every child is reaped, exit status 130 / 143. Each rank runs in its
// own process group, so the signals reach the programs it starts too.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int signo) {
  const int saved = errno;
  const unsigned char c = static_cast<unsigned char>(signo);
  (void)!::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: launch -n N [--backend gloo|nccl|threads] [--nodes K --node-rank R] [--master ADDR:PORT]\n"
      "              [--grace SECONDS] -- CMD ARGS...\n"
      "  Starts N local processes of CMD with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
      "  MASTER_ADDR, MASTER_PORT (torchrun's conventions; DISTLAB_BACKEND with --backend), prefixes\n"
      "  their output lines with [rank G], stops the others when one fails (SIGTERM, then SIGKILL after\n"
      "  --grace seconds, default 5) and exits with the failed rank's status; Ctrl-C is forwarded.\n"
      "  Several machines: run it once per machine with the same -n, --nodes K and --master ADDR:PORT\n"
      "  (ADDR: an address of node 0 the others reach) and --node-rank 0..K-1.\n");
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

bool ParseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

struct Child {
  int rank = 0;  // global
  pid_t pid = -1;
  int fd = -1;          // its merged stdout/stderr
  std::string pending;  // a partial line
  bool reaped = false;
  int status = 0;
};

void Emit(Child& c, const char* data, size_t n, bool flush_partial) {
  c.pending.append(data, n);
  size_t start = 0;
  while (true) {
    const size_t nl = c.pending.find('\n', start);
    if (nl == std::string::npos) break;
    std::printf("[rank %d] %.*s\n", c.rank, static_cast<int>(nl - start), c.pending.data() + start);
    start = nl + 1;
  }
  c.pending.erase(0, start);
  if (flush_partial && !c.pending.empty()) {
    std::printf("[rank %d] %s\n", c.rank, c.pending.c_str());
    c.pending.clear();
  }
  std::fflush(stdout);
}

// What the command line asks for.
struct Options {
  int n = 0;  // ranks on this node
  int nodes = 1, node_rank = 0, grace_s = 5;
  std::string backend;             // DISTLAB_BACKEND for the ranks; "" leaves it alone
  std::string addr = "127.0.0.1";  // MASTER_ADDR
  int port = 0;                    // MASTER_PORT
  char** cmd = nullptr;            // the command and its arguments, null-terminated (argv's tail)
};

// Parses argv into `o`. Returns -1 when the launcher should go on, else the status to exit with (0 after
// --help, 2 after an error, which it has printed).
int ParseArgs(int argc, char** argv, Options& o) {
  std::string master;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "[launch] error: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    const auto number = [&](const char* what, int lo, int hi, int* out, const char* expected) {
      if (ParseInt(value(what), lo, hi, out)) return true;
      std::fprintf(stderr, "[launch] error: %s takes %s\n", what, expected);
      return false;
    };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    } else if (a == "-n" || a == "--nproc") {
      if (!number("-n", 1, 1024, &o.n, "a number of processes in 1..1024")) return 2;
    } else if (a == "--nodes") {
      if (!number("--nodes", 1, 4096, &o.nodes, "a number >= 1")) return 2;
    } else if (a == "--node-rank") {
      if (!number("--node-rank", 0, 4095, &o.node_rank, "a number >= 0")) return 2;
    } else if (a == "--master") {
      master = value("--master");
    } else if (a == "--backend") {
      o.backend = value("--backend");
      if (o.backend != "gloo" && o.backend != "nccl" && o.backend != "threads") {
        std::fprintf(stderr, "[launch] error: --backend is gloo, nccl or threads, not '%s'\n",
                     o.backend.c_str());
        return 2;
      }
    } else if (a == "--grace") {
      if (!number("--grace", 0, 3600, &o.grace_s, "seconds")) return 2;
    } else {
      std::fprintf(stderr, "[launch] error: unknown option '%s' (the command goes after --)\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }
  if (o.n == 0 || i >= argc) {
    std::fprintf(stderr, "[launch] error: need -n N and a command after --\n");
    Usage(stderr);
    return 2;
  }
  if (o.node_rank >= o.nodes) {
    std::fprintf(stderr, "[launch] error: --node-rank %d is out of range for --nodes %d\n", o.node_rank,
                 o.nodes);
    return 2;
  }
  o.cmd = argv + i;
  // Where rank 0 serves the store: --master, or on one node a free port of 127.0.0.1.
  if (!master.empty()) {
    const size_t colon = master.rfind(':');
    if (colon == std::string::npos || colon == 0 ||
        !ParseInt(master.c_str() + colon + 1, 1, 65535, &o.port)) {
      std::fprintf(stderr, "[launch] error: --master takes ADDR:PORT, got '%s'\n", master.c_str());
      return 2;
    }
    o.addr = master.substr(0, colon);
  } else if (o.nodes > 1) {
    std::fprintf(stderr, "[launch] error: with --nodes > 1 every node needs --master ADDR:PORT (node 0's)\n");
    return 2;
  } else {
    o.port = FreePort();
    if (o.port == 0) {
      std::fprintf(stderr, "[launch] error: could not find a free port on 127.0.0.1\n");
      return 1;
    }
  }
  return -1;
}

// SIGINT, SIGTERM, SIGHUP and SIGCHLD become bytes on g_signal_pipe, which the supervisor's poll loop reads.
bool InstallSignalHandlers() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("[launch] pipe");
    return false;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &sa, nullptr);
  return true;
}

// In the child: its own process group, default signals, output into `out_fd`, torchrun's variables, exec.
[[noreturn]] void ExecRank(const Options& o, int local, int rank, int out_fd) {
  ::setpgid(0, 0);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
  ::dup2(out_fd, 1);
  ::dup2(out_fd, 2);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(o.nodes * o.n).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.n).c_str(), 1);
  ::setenv("GROUP_RANK", std::to_string(o.node_rank).c_str(), 1);
  ::setenv("MASTER_ADDR", o.addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(o.port).c_str(), 1);
  if (!o.backend.empty()) ::setenv("DISTLAB_BACKEND", o.backend.c_str(), 1);
  ::execvp(o.cmd[0], o.cmd);
  std::fprintf(stderr, "cannot run '%s': %s\n", o.cmd[0], std::strerror(errno));
  ::_exit(127);
}

// Forks this node's ranks, each with its merged output on a pipe. False (after printing why) on a failure.
bool StartRanks(const Options& o, std::vector<Child>& children) {
  children.assign(o.n, Child());
  for (int local = 0; local < o.n; ++local) {
    Child& c = children[local];
    c.rank = o.node_rank * o.n + local;
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      std::perror("[launch] pipe");
      return false;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("[launch] fork");
      return false;
    }
    if (pid == 0) ExecRank(o, local, c.rank, out[1]);
    ::setpgid(pid, pid);
    ::close(out[1]);
    c.pid = pid;
    c.fd = out[0];
  }
  std::fprintf(stderr, "[launch] started %d rank(s) %d..%d of %d; MASTER_ADDR=%s MASTER_PORT=%d\n", o.n,
               o.node_rank * o.n, o.node_rank * o.n + o.n - 1, o.nodes * o.n, o.addr.c_str(), o.port);
  return true;
}

// Watches the ranks until every one is reaped and its output drained: prints their lines, stops the others
// when one fails or a signal arrives (SIGTERM, then SIGKILL after the grace period), and knows the status
// the launcher exits with.
class Supervisor {
 public:
  Supervisor(std::vector<Child>& children, int grace_s) : children_(children), grace_s_(grace_s) {}

  void Run() {
    while (!Done()) {
      std::vector<pollfd> fds;
      fds.push_back({g_signal_pipe[0], POLLIN, 0});
      std::vector<Child*> owners;
      for (Child& c : children_) {
        if (c.fd >= 0) {
          fds.push_back({c.fd, POLLIN, 0});
          owners.push_back(&c);
        }
      }
      const bool all_reaped = AllReaped();
      // Once every rank is reaped, drain what is left; a grandchild may hold a pipe open.
      const int ready = ::poll(fds.data(), fds.size(), all_reaped ? 100 : 200);
      if (ready < 0 && errno != EINTR) {
        std::perror("[launch] poll");
        return;
      }
      if (ready == 0 && all_reaped) {
        for (Child& c : children_) Close(c);
        continue;
      }
      if (ready > 0 && (fds[0].revents & POLLIN)) ReadSignals();
      for (size_t k = 1; ready > 0 && k < fds.size(); ++k) {
        if (fds[k].revents) ReadOutput(*owners[k - 1]);
      }
      Reap();
      KillAfterGrace();
    }
  }

  int ExitStatus() const {
    if (first_failed_ >= 0) {
      const Child& c = children_[first_failed_];
      std::fprintf(stderr, "[launch] FAILED: rank %d (%s)\n", c.rank, Describe(c.status).c_str());
      if (WIFEXITED(c.status)) return WEXITSTATUS(c.status);
      return 128 + WTERMSIG(c.status);
    }
    if (interrupted_ != 0) return 128 + interrupted_;
    std::fprintf(stderr, "[launch] all %zu rank(s) exited 0\n", children_.size());
    return 0;
  }

 private:
  bool AllReaped() const {
    for (const Child& c : children_) {
      if (!c.reaped) return false;
    }
    return true;
  }
  bool Done() const {
    for (const Child& c : children_) {
      if (c.fd >= 0) return false;
    }
    return AllReaped();
  }

  void StopAll(int sig) {
    for (Child& c : children_) {
      if (!c.reaped) ::kill(-c.pid, sig);
    }
  }
  void StartStopping(int sig) {
    stopping_ = true;
    StopAll(sig);
    kill_at_ = Clock::now() + std::chrono::seconds(grace_s_);
  }

  // Flushes a rank's last partial line and closes its output.
  void Close(Child& c) {
    if (c.fd < 0) return;
    Emit(c, "", 0, true);
    ::close(c.fd);
    c.fd = -1;
  }

  void ReadOutput(Child& c) {
    char buf[65536];
    const ssize_t r = ::read(c.fd, buf, sizeof(buf));
    if (r > 0) {
      Emit(c, buf, static_cast<size_t>(r), false);
    } else if (r == 0 || errno != EINTR) {
      Close(c);
    }
  }

  // The first SIGINT/SIGTERM/SIGHUP is forwarded to every rank (SIGHUP as SIGTERM); a second one kills.
  void ReadSignals() {
    unsigned char sigs[64];
    const ssize_t got = ::read(g_signal_pipe[0], sigs, sizeof(sigs));
    for (ssize_t k = 0; k < got; ++k) {
      const int sig = sigs[k];
      if (sig == SIGCHLD) continue;
      if (interrupted_ == 0) {
        interrupted_ = sig;
        std::fprintf(stderr, "[launch] received %s: forwarding it to every rank\n", strsignal(sig));
        StartStopping(sig == SIGHUP ? SIGTERM : sig);
      } else {
        std::fprintf(stderr, "[launch] received %s again: killing every rank\n", strsignal(sig));
        StopAll(SIGKILL);
      }
    }
  }

  // Collects exited ranks; the first that failed (before any stop) is reported and stops the others.
  void Reap() {
    while (true) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (size_t k = 0; k < children_.size(); ++k) {
        Child& c = children_[k];
        if (c.pid != pid) continue;
        c.reaped = true;
        c.status = status;
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && first_failed_ < 0 && !stopping_) {
          first_failed_ = static_cast<int>(k);
          std::fprintf(stderr, "[launch] rank %d failed: %s; stopping the other ranks\n", c.rank,
                       Describe(status).c_str());
          StartStopping(SIGTERM);
        }
      }
    }
  }

  void KillAfterGrace() {
    if (!stopping_ || Clock::now() < kill_at_) return;
    if (!AllReaped()) {
      std::fprintf(stderr, "[launch] ranks still running after %d s: SIGKILL\n", grace_s_);
      StopAll(SIGKILL);
    }
    kill_at_ = Clock::time_point::max();
  }

  std::vector<Child>& children_;
  const int grace_s_;
  int first_failed_ = -1;  // index into children_
  int interrupted_ = 0;    // the signal that asked us to stop
  bool stopping_ = false;
  Clock::time_point kill_at_ = Clock::time_point::max();
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const int exit_status = ParseArgs(argc, argv, options); exit_status >= 0) return exit_status;
  if (!InstallSignalHandlers()) return 1;
  std::vector<Child> children;
  if (!StartRanks(options, children)) return 1;
  Supervisor supervisor(children, options.grace_s);
  supervisor.Run();
  return supervisor.ExitStatus();
}
