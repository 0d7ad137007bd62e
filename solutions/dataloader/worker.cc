// Lab 2, stage C (solution): forking a worker, reading how it ended, reclaiming what it left behind.
#include "labs/dataloader/worker.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace distlab::dataloader {

absl::StatusOr<pid_t> ForkWorker(const std::function<int()>& body) {
  // (1) Whatever sits in the parent's stdio buffers would be copied into the child and flushed by both.
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
  if (pid > 0) return pid;
  // The child. Only the thread that called fork exists here: locks other threads held stay locked forever,
  // so the body must not wait for anything those threads own.
  int code = 0;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %d: uncaught exception: %s\n", static_cast<int>(::getpid()), e.what());
    code = 1;
  } catch (...) {
    std::fprintf(stderr, "worker %d: uncaught non-standard exception\n", static_cast<int>(::getpid()));
    code = 1;
  }
  // (2) Flush what the child wrote, then leave without the parent's atexit handlers and static destructors.
  std::fflush(nullptr);
  ::_exit(code);
}

std::string DescribeWorkerExit(pid_t pid, int wait_status) {
  const std::string who = absl::StrCat("DataLoader worker (pid ", static_cast<int>(pid), ")");
  if (WIFEXITED(wait_status)) {
    return absl::StrCat(who, " exited unexpectedly with exit code ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = ::strsignal(sig);
    std::string msg = absl::StrCat(who, " is killed by signal: ", name ? name : absl::StrCat("signal ", sig));
    if (sig == SIGBUS) {
      // A write into a shared-memory segment that /dev/shm could not back is delivered as SIGBUS.
      absl::StrAppend(&msg,
                      ". This can be caused by insufficient shared memory (/dev/shm): enlarge it "
                      "(e.g. docker --shm-size) or keep fewer or smaller batches in flight");
    }
    return msg;
  }
  return absl::StrCat(who, " ended with wait status ", wait_status);
}

std::string DescribeWorkerException(const std::string& type, int worker_id, const std::string& message) {
  return absl::StrCat("Caught ", type, " in DataLoader worker process ", worker_id, ". Original: ", message);
}

absl::StatusOr<std::vector<std::string>> ReclaimSegments(const std::string& prefix) {
  if (prefix.empty())
    return absl::InvalidArgumentError("ReclaimSegments: empty prefix would match everything");
  std::vector<std::string> names;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return absl::InternalError(absl::StrCat("opendir /dev/shm: ", std::strerror(errno)));
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  std::vector<std::string> unlinked;
  for (const std::string& name : names) {
    if (::shm_unlink(("/" + name).c_str()) == 0) unlinked.push_back(name);  // ENOENT: someone else was first
  }
  return unlinked;
}

std::string LeakReport(size_t n) {
  if (n == 0) return "";
  return absl::StrCat("resource_tracker: There appear to be ", n,
                      " leaked shared_memory objects to clean up at shutdown");
}

}  // namespace distlab::dataloader
