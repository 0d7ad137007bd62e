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

}  // namespace

int main(int argc, char** argv) {
  int n = 0, nodes = 1, node_rank = 0, grace_s = 5;
  std::string backend, master;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "[launch] error: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    } else if (a == "-n" || a == "--nproc") {
      if (!ParseInt(value("-n"), 1, 1024, &n)) {
        std::fprintf(stderr, "[launch] error: -n takes a number of processes in 1..1024\n");
        return 2;
      }
    } else if (a == "--nodes") {
      if (!ParseInt(value("--nodes"), 1, 4096, &nodes)) {
        std::fprintf(stderr, "[launch] error: --nodes takes a number >= 1\n");
        return 2;
      }
    } else if (a == "--node-rank") {
      if (!ParseInt(value("--node-rank"), 0, 4095, &node_rank)) {
        std::fprintf(stderr, "[launch] error: --node-rank takes a number >= 0\n");
        return 2;
      }
    } else if (a == "--master") {
      master = value("--master");
    } else if (a == "--backend") {
      backend = value("--backend");
      if (backend != "gloo" && backend != "nccl" && backend != "threads") {
        std::fprintf(stderr, "[launch] error: --backend is gloo, nccl or threads, not '%s'\n",
                     backend.c_str());
        return 2;
      }
    } else if (a == "--grace") {
      if (!ParseInt(value("--grace"), 0, 3600, &grace_s)) {
        std::fprintf(stderr, "[launch] error: --grace takes seconds\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "[launch] error: unknown option '%s' (the command goes after --)\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }
  if (n == 0 || i >= argc) {
    std::fprintf(stderr, "[launch] error: need -n N and a command after --\n");
    Usage(stderr);
    return 2;
  }
  if (node_rank >= nodes) {
    std::fprintf(stderr, "[launch] error: --node-rank %d is out of range for --nodes %d\n", node_rank, nodes);
    return 2;
  }
  std::string addr = "127.0.0.1";
  int port = 0;
  if (!master.empty()) {
    const size_t colon = master.rfind(':');
    if (colon == std::string::npos || colon == 0 || !ParseInt(master.c_str() + colon + 1, 1, 65535, &port)) {
      std::fprintf(stderr, "[launch] error: --master takes ADDR:PORT, got '%s'\n", master.c_str());
      return 2;
    }
    addr = master.substr(0, colon);
  } else if (nodes > 1) {
    std::fprintf(stderr, "[launch] error: with --nodes > 1 every node needs --master ADDR:PORT (node 0's)\n");
    return 2;
  } else {
    port = FreePort();
    if (port == 0) {
      std::fprintf(stderr, "[launch] error: could not find a free port on 127.0.0.1\n");
      return 1;
    }
  }
  char** cmd = argv + i;

  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("[launch] pipe");
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &sa, nullptr);

  const int world = nodes * n;
  std::vector<Child> children(n);
  for (int local = 0; local < n; ++local) {
    Child& c = children[local];
    c.rank = node_rank * n + local;
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      std::perror("[launch] pipe");
      return 1;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("[launch] fork");
      return 1;
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      ::setenv("RANK", std::to_string(c.rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("GROUP_RANK", std::to_string(node_rank).c_str(), 1);
      ::setenv("MASTER_ADDR", addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (!backend.empty()) ::setenv("DISTLAB_BACKEND", backend.c_str(), 1);
      ::execvp(cmd[0], cmd);
      std::fprintf(stderr, "cannot run '%s': %s\n", cmd[0], std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    ::close(out[1]);
    c.pid = pid;
    c.fd = out[0];
  }
  std::fprintf(stderr, "[launch] started %d rank(s) %d..%d of %d; MASTER_ADDR=%s MASTER_PORT=%d\n", n,
               node_rank * n, node_rank * n + n - 1, world, addr.c_str(), port);

  int first_failed = -1;  // index into children
  int interrupted = 0;    // the signal that asked us to stop
  bool stopping = false;
  Clock::time_point kill_at = Clock::time_point::max();
  auto stop_all = [&](int sig) {
    for (Child& c : children) {
      if (!c.reaped) ::kill(-c.pid, sig);
    }
  };
  auto reap = [&] {
    while (true) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (size_t k = 0; k < children.size(); ++k) {
        Child& c = children[k];
        if (c.pid != pid) continue;
        c.reaped = true;
        c.status = status;
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && first_failed < 0 && !stopping) {
          first_failed = static_cast<int>(k);
          std::fprintf(stderr, "[launch] rank %d failed: %s; stopping the other ranks\n", c.rank,
                       Describe(status).c_str());
          stopping = true;
          stop_all(SIGTERM);
          kill_at = Clock::now() + std::chrono::seconds(grace_s);
        }
      }
    }
  };

  while (true) {
    bool all_reaped = true, all_closed = true;
    for (const Child& c : children) {
      all_reaped = all_reaped && c.reaped;
      all_closed = all_closed && c.fd < 0;
    }
    if (all_reaped && all_closed) break;
    std::vector<pollfd> fds;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    std::vector<Child*> owners;
    for (Child& c : children) {
      if (c.fd >= 0) {
        fds.push_back({c.fd, POLLIN, 0});
        owners.push_back(&c);
      }
    }
    int wait_ms = 200;
    if (all_reaped) wait_ms = 100;  // drain what is left; a grandchild may hold a pipe open
    const int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno != EINTR) {
      std::perror("[launch] poll");
      break;
    }
    if (ready == 0 && all_reaped) {
      for (Child& c : children) {
        if (c.fd >= 0) {
          Emit(c, "", 0, true);
          ::close(c.fd);
          c.fd = -1;
        }
      }
      continue;
    }
    if (ready > 0 && (fds[0].revents & POLLIN)) {
      unsigned char sigs[64];
      const ssize_t got = ::read(g_signal_pipe[0], sigs, sizeof(sigs));
      for (ssize_t k = 0; k < got; ++k) {
        const int sig = sigs[k];
        if (sig == SIGCHLD) continue;
        if (interrupted == 0) {
          interrupted = sig;
          std::fprintf(stderr, "[launch] received %s: forwarding it to every rank\n", strsignal(sig));
          stopping = true;
          stop_all(sig == SIGHUP ? SIGTERM : sig);
          kill_at = Clock::now() + std::chrono::seconds(grace_s);
        } else {
          std::fprintf(stderr, "[launch] received %s again: killing every rank\n", strsignal(sig));
          stop_all(SIGKILL);
        }
      }
    }
    for (size_t k = 1; ready > 0 && k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      Child& c = *owners[k - 1];
      char buf[65536];
      const ssize_t r = ::read(c.fd, buf, sizeof(buf));
      if (r > 0) {
        Emit(c, buf, static_cast<size_t>(r), false);
      } else if (r == 0 || errno != EINTR) {
        Emit(c, "", 0, true);
        ::close(c.fd);
        c.fd = -1;
      }
    }
    reap();
    if (stopping && Clock::now() >= kill_at) {
      bool any = false;
      for (const Child& c : children) any = any || !c.reaped;
      if (any) {
        std::fprintf(stderr, "[launch] ranks still running after %d s: SIGKILL\n", grace_s);
        stop_all(SIGKILL);
      }
      kill_at = Clock::time_point::max();
    }
  }
  if (first_failed >= 0) {
    const Child& c = children[first_failed];
    std::fprintf(stderr, "[launch] FAILED: rank %d (%s)\n", c.rank, Describe(c.status).c_str());
    if (WIFEXITED(c.status)) return WEXITSTATUS(c.status);
    return 128 + WTERMSIG(c.status);
  }
  if (interrupted != 0) return 128 + interrupted;
  std::fprintf(stderr, "[launch] all %d rank(s) exited 0\n", n);
  return 0;
}
