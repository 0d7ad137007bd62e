// case_init: the parent of one graded case's process, started by the grader's runner (runner.cc).
//
// The runner starts it either as PID 1 of fresh PID, network, mount, IPC and UTS namespaces (when root and
// the kernel allows them: "namespaces" mode) or as an ordinary child ("subreaper" mode). It then:
//   1. reads its settings, a JSON object, from stdin (not argv: /proc/<pid>/cmdline is readable by anyone);
//   2. in namespaces mode: makes every mount private, mounts a fresh tmpfs on /tmp, /var/tmp and /dev/shm
//   (what
//      the case writes there vanishes with it), mounts a /proc that shows only the namespace's processes, and
//      brings the loopback interface up (the only network there is); in subreaper mode: becomes a child
//      subreaper, so every process the case starts stays its descendant however it detaches (setsid, double
//      fork);
//   3. starts the test binary: stdout and stderr on the runner's output pipe, the record pipe on the
//   descriptor
//      number the settings name, every other descriptor closed, resource limits set, privileges dropped to
//      the grading user, no new privileges;
//   4. reaps every process that ends, and samples the case's peaks (address space, tasks, open files) every
//   few
//      milliseconds, so that a case that ran into a limit can be told so by name;
//   5. when the test process has ended: kills whatever the case left running (namespaces mode: by exiting, as
//      PID 1's exit kills the namespace; subreaper mode: every descendant, until none is left), writes one
//      JSON line to fd 4 (the status pipe) and exits 0.
// SIGTERM (the runner's timeout or its own stop) kills the test and everything it started the same way.
//
//   case_init            (settings on stdin; fds: 1, 2 output, 3 record pipe, 4 status pipe)
//   case_init --probe    checks that the namespace set-up works here (as PID 1 of new namespaces); exit 0 if
//   so
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace {

using json = nlohmann::json;

constexpr int kOutputFd = 1;
constexpr int kRecordFd = 3;
constexpr int kStatusFd = 4;

struct Settings {
  std::string binary;
  std::string workdir;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
  int record_fd = 0;  // the number the test process finds the record pipe on
  bool namespaces = false;
  long long tmpfs_mb = 512;
  // Resource limits (0 = none).
  long long address_space_mb = 0, processes = 0, file_size_mb = 0, open_files = 0, cpu_seconds = 0;
};

volatile sig_atomic_t g_terminate = 0;

void OnTerminate(int) { g_terminate = 1; }

[[noreturn]] void Fail(const std::string& what) {
  std::string line = json{{"error", what}}.dump() + "\n";
  ssize_t ignored = ::write(kStatusFd, line.data(), line.size());
  (void)ignored;
  ::_exit(100);
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Settings ReadSettings() {
  std::stringstream ss;
  ss << std::cin.rdbuf();
  json j = json::parse(ss.str());
  Settings s;
  s.binary = j.at("binary");
  s.workdir = j.at("workdir");
  s.argv = j.at("argv").get<std::vector<std::string>>();
  s.env = j.at("env").get<std::vector<std::string>>();
  s.drop = j.value("drop", false);
  s.uid = j.value("uid", 0u);
  s.gid = j.value("gid", 0u);
  s.record_fd = j.at("record_fd");
  s.namespaces = j.value("namespaces", false);
  s.tmpfs_mb = j.value("tmpfs_mb", 512LL);
  const json& l = j.value("limits", json::object());
  s.address_space_mb = l.value("address_space_mb", 0LL);
  s.processes = l.value("processes", 0LL);
  s.file_size_mb = l.value("file_size_mb", 0LL);
  s.open_files = l.value("open_files", 0LL);
  s.cpu_seconds = l.value("cpu_seconds", 0LL);
  return s;
}

// Namespaces mode, as PID 1: private mounts, fresh temporary directories, a /proc of this namespace, loopback
// up.
void SetUpNamespace(long long tmpfs_mb, const std::string& scratch_root) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    Fail(Errno("mount --make-rprivate /"));
  const std::string opts = "size=" + std::to_string(tmpfs_mb) + "m,mode=1777";
  for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
    const std::string target = scratch_root + dir;
    struct stat st;
    if (::stat(target.c_str(), &st) != 0) continue;  // not on this system: nothing to cover
    if (::mount("tmpfs", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
      Fail(Errno("mount tmpfs on " + target));
    }
  }
  const std::string proc = scratch_root + "/proc";
  if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    Fail(Errno("mount proc on " + proc));
  }
  int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock >= 0) {
    struct ifreq ifr;
    std::memset(&ifr, 0, sizeof ifr);
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (::ioctl(sock, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags |= IFF_UP;
      ::ioctl(sock, SIOCSIFFLAGS, &ifr);  // best effort: tests that need no network do not care
    }
    ::close(sock);
  }
}

void SetLimit(int resource, long long value, long long hard_extra = 0) {
  if (value <= 0) return;
  struct rlimit rl = {static_cast<rlim_t>(value), static_cast<rlim_t>(value + hard_extra)};
  ::setrlimit(resource, &rl);
}

// The test process: between fork and exec (this program is single-threaded, so any call is safe here).
[[noreturn]] void ExecTest(const Settings& s, int binary_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull < 0 || ::dup2(devnull, 0) < 0) Fail(Errno("stdin from /dev/null"));
  ::dup2(kOutputFd, 2);
  if (::dup2(kRecordFd, s.record_fd) < 0) Fail(Errno("dup2 of the record pipe"));
  // Everything else closes: the status pipe, the binary's descriptor (on exec), stray inherited ones.
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != s.record_fd && fd != binary_fd) ::close(fd);
  }
  ::syscall(SYS_close_range, 1024u, ~0u, 0u);
  ::fcntl(binary_fd, F_SETFD, FD_CLOEXEC);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  SetLimit(RLIMIT_AS, s.address_space_mb << 20);
  SetLimit(RLIMIT_FSIZE, s.file_size_mb << 20);
  SetLimit(RLIMIT_NOFILE, s.open_files);
  SetLimit(RLIMIT_CPU, s.cpu_seconds, 2);  // SIGXCPU at the soft limit, SIGKILL two seconds later
  if (s.drop) {
    SetLimit(RLIMIT_NPROC, s.processes);  // counted per user: only meaningful for the grading user
    if (::setgroups(0, nullptr) != 0) Fail(Errno("setgroups"));
    if (::setgid(s.gid) != 0) Fail(Errno("setgid"));
    if (::setuid(s.uid) != 0) Fail(Errno("setuid"));
    if (::setuid(0) == 0) Fail("could not drop root");
  }
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  std::vector<char*> argv, envp;
  std::vector<std::string> args = s.argv, env = s.env;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  ::fexecve(binary_fd, argv.data(), envp.data());
  Fail(Errno("exec " + s.binary));
}

// Reads a small /proc file; "" when it is gone.
std::string ReadSmall(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

long long StatusField(const std::string& status, const char* key) {
  size_t at = status.find(key);
  if (at == std::string::npos) return 0;
  return std::atoll(status.c_str() + at + std::strlen(key));
}

std::vector<pid_t> Processes() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  ::closedir(d);
  return out;
}

int CountEntries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int n = 0;
  while (struct dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

struct Peaks {
  long long vm_peak_kb = 0;  // the test process's address-space high-water mark
  long long tasks = 0;       // threads of every process in the namespace (namespaces mode) or of the test
  long long fds = 0;         // open descriptors of the test process
};

// The tasks the process limit counts. Namespaces mode: every process of the namespace. Subreaper mode with
// privileges dropped: every process of the grading user (RLIMIT_NPROC counts per user, and the cases run one
// at a time), so a fork bomb that spreads over processes is seen there too (a chroot or a container without
// CAP_SYS_ADMIN runs in this mode). Otherwise: the test process's threads.
void Sample(pid_t test, bool whole_namespace, const uid_t* user, Peaks* p) {
  const std::string status = ReadSmall("/proc/" + std::to_string(test) + "/status");
  if (!status.empty()) {
    p->vm_peak_kb = std::max(p->vm_peak_kb, StatusField(status, "VmPeak:"));
    p->fds = std::max<long long>(p->fds, CountEntries("/proc/" + std::to_string(test) + "/fd"));
  }
  long long tasks = 0;
  if (whole_namespace) {
    for (pid_t pid : Processes()) {
      if (pid == 1) continue;  // this program
      tasks += std::max(1LL, StatusField(ReadSmall("/proc/" + std::to_string(pid) + "/status"), "Threads:"));
    }
  } else if (user != nullptr) {
    for (pid_t pid : Processes()) {
      const std::string st = ReadSmall("/proc/" + std::to_string(pid) + "/status");
      if (st.empty() || StatusField(st, "Uid:") != static_cast<long long>(*user)) continue;
      tasks += std::max(1LL, StatusField(st, "Threads:"));
    }
  } else if (!status.empty()) {
    tasks = StatusField(status, "Threads:");
  }
  p->tasks = std::max(p->tasks, tasks);
}

// Subreaper mode: kills every descendant (each one reparents to this process when its parent dies), until
// none is left. Returns how many were killed.
int KillDescendants() {
  int killed = 0;
  for (int round = 0; round < 1000; ++round) {
    const std::string me = std::to_string(::getpid());
    bool any = false;
    for (pid_t pid : Processes()) {
      const std::string status = ReadSmall("/proc/" + std::to_string(pid) + "/status");
      size_t at = status.find("PPid:");
      if (at == std::string::npos || std::atoi(status.c_str() + at + 5) != ::getpid()) continue;
      any = true;
      ::kill(pid, SIGKILL);
      ++killed;
    }
    int st;
    while (::waitpid(-1, &st, WNOHANG) > 0) {
    }
    if (!any) {
      if (::waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    (void)me;
  }
  return killed;
}

int Probe() {
  // As PID 1 of new namespaces: the same set-up a case gets, on the real directories (they are private here).
  SetUpNamespace(16, "");
  return ::getpid() == 1 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--probe") return Probe();
  Settings s;
  try {
    s = ReadSettings();
  } catch (const std::exception& e) {
    Fail(std::string("bad settings on stdin: ") + e.what());
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnTerminate;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  if (::chdir(s.workdir.c_str()) != 0) Fail(Errno("chdir " + s.workdir));
  // Opened before the mounts: the binary may live under a directory the fresh /tmp covers.
  int binary_fd = ::open(s.binary.c_str(), O_PATH | O_CLOEXEC);
  if (binary_fd < 0) Fail(Errno("open " + s.binary));
  if (s.namespaces) {
    SetUpNamespace(s.tmpfs_mb, "");
  } else {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  auto start = std::chrono::steady_clock::now();
  pid_t test = ::fork();
  if (test < 0) Fail(Errno("fork"));
  if (test == 0) ExecTest(s, binary_fd);
  ::close(binary_fd);
  ::close(kRecordFd);
  ::close(kOutputFd);
  ::close(2);

  Peaks peaks;
  int test_status = 0;
  bool test_done = false, terminated = false;
  while (!test_done) {
    Sample(test, s.namespaces, s.drop ? &s.uid : nullptr, &peaks);
    int st;
    pid_t w;
    while ((w = ::waitpid(-1, &st, WNOHANG)) > 0) {
      if (w == test) {
        test_status = st;
        test_done = true;
      }
    }
    if (test_done) break;
    if (g_terminate) {
      terminated = true;
      ::kill(-test, SIGKILL);
      ::kill(test, SIGKILL);
      ::waitpid(test, &test_status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // What the case left running.
  int left = 0;
  if (s.namespaces) {
    left = static_cast<int>(Processes().size()) - 1;  // they die with this process
  } else {
    ::kill(-test, SIGKILL);
    left = KillDescendants();
  }
  struct rusage ru;
  ::getrusage(RUSAGE_CHILDREN, &ru);
  json out = {
      {"wait_status", test_status},
      {"exited", WIFEXITED(test_status)},
      {"exit_code", WIFEXITED(test_status) ? WEXITSTATUS(test_status) : -1},
      {"signal", WIFSIGNALED(test_status) ? WTERMSIG(test_status) : 0},
      {"terminated", terminated},
      {"seconds", seconds},
      {"vm_peak_mb", peaks.vm_peak_kb / 1024.0},
      {"tasks_peak", peaks.tasks},
      {"fds_peak", peaks.fds},
      {"cpu_s", ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6},
      {"left_running", left}};
  std::string line = out.dump() + "\n";
  ssize_t ignored = ::write(kStatusFd, line.data(), line.size());
  (void)ignored;
  return 0;
}
