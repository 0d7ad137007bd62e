// Sweeps of processes and files a grading leaves behind (see sweep.h).
#include "tools/grader/sweep.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace distlab::grader {

namespace {

namespace fs = std::filesystem;

// A numeric field ("Uid:", "PPid:") of /proc/<pid>/status; -1 when the process is gone.
long StatusField(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::strtol(line.c_str() + key.size(), nullptr, 10);
  }
  return -1;
}

std::vector<pid_t> AllProcesses() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
      out.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return out;
}

void ReapAll() {
  int st;
  while (::waitpid(-1, &st, WNOHANG) > 0) {
  }
}

}  // namespace

std::vector<pid_t> ProcessesOfUser(uid_t uid) {
  std::vector<pid_t> out;
  for (pid_t pid : AllProcesses()) {
    if (StatusField(pid, "Uid:") == static_cast<long>(uid)) out.push_back(pid);
  }
  return out;
}

int KillProcessesOfUser(uid_t uid) {
  if (uid == 0 || ::geteuid() != 0) return 0;
  const int found = static_cast<int>(ProcessesOfUser(uid).size());
  for (int round = 0; round < 100 && !ProcessesOfUser(uid).empty(); ++round) {
    pid_t pid = ::fork();
    if (pid == 0) {
      // kill(-1) as that user: every process it may signal (its own), never this one's parent (root).
      if (::setuid(uid) == 0) ::kill(-1, SIGKILL);
      ::_exit(0);
    }
    if (pid > 0) ::waitpid(pid, nullptr, 0);
    ReapAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return found;
}

int KillDescendants(const std::vector<pid_t>& except) {
  const pid_t me = ::getpid();
  int killed = 0;
  for (int round = 0; round < 200; ++round) {
    // The children of this process; after they die, their own children reparent here (a child subreaper) or
    // to init, so each round looks again.
    std::vector<pid_t> children;
    for (pid_t pid : AllProcesses()) {
      if (StatusField(pid, "PPid:") == me && std::find(except.begin(), except.end(), pid) == except.end()) {
        children.push_back(pid);
      }
    }
    if (children.empty()) break;
    for (pid_t pid : children) {
      ::kill(-pid, SIGKILL);  // its process group first, then itself
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ++killed;
    }
    ReapAll();
  }
  return killed;
}

std::vector<std::string> RemoveFilesOfUser(uid_t uid, const std::vector<std::string>& dirs) {
  std::vector<std::string> removed;
  if (uid == 0) return removed;
  for (const auto& d : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      struct stat st;
      if (::lstat(e.path().c_str(), &st) != 0 || st.st_uid != uid) continue;
      fs::remove_all(e.path(), ec);
      removed.push_back(e.path().string());
    }
  }
  return removed;
}

}  // namespace distlab::grader
