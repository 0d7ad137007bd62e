// Lab 2 (dataloader), stage C: forking a worker, reading how it ended, and the resource tracker.
// Read notes/02-dataloader.md section 3 (exit vs _exit, why fork is dangerous with threads) first.
#include "labs/dataloader/worker.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage C): ForkWorker.
//   1. Flush all stdio streams before fork (fflush(nullptr)): otherwise what the parent had buffered is
//      copied into the child and written twice.
//   2. fork(); failure -> Internal naming strerror(errno). In the parent return the child's pid.
//   3. In the child: run body() inside try/catch (an exception prints to stderr and becomes exit code 1),
//      flush stdio, and leave with _exit(code) -- never exit(), never return: exit() runs the parent's
//      atexit handlers and static destructors in the child.
absl::StatusOr<pid_t> ForkWorker(const std::function<int()>& body) {
  return Unimplemented("dataloader", "C", "ForkWorker");
}

// TODO(dataloader stage C): DescribeWorkerExit -- read the wait status with WIFEXITED/WEXITSTATUS and
// WIFSIGNALED/WTERMSIG (worker.h has the exact texts; strsignal names the signal; SIGBUS adds the
// shared-memory hint).
std::string DescribeWorkerExit(pid_t pid, int wait_status) {
  throw NotImplementedError("dataloader", "C", "DescribeWorkerExit");
}

// TODO(dataloader stage C): DescribeWorkerException -- "Caught <type> in DataLoader worker process <id>.
// Original: <message>".
std::string DescribeWorkerException(const std::string& type, int worker_id, const std::string& message) {
  throw NotImplementedError("dataloader", "C", "DescribeWorkerException");
}

// TODO(dataloader stage C): ReclaimSegments.
//   1. An empty prefix -> InvalidArgument (it would match every segment on the machine).
//   2. List /dev/shm (opendir/readdir); every name starting with `prefix` is shm_unlink("/" + name)'d.
//   3. Return the names actually unlinked, sorted (ENOENT: someone else was first; skip it).
absl::StatusOr<std::vector<std::string>> ReclaimSegments(const std::string& prefix) {
  return Unimplemented("dataloader", "C", "ReclaimSegments");
}

// TODO(dataloader stage C): LeakReport -- "" for 0, else "resource_tracker: There appear to be N leaked
// shared_memory objects to clean up at shutdown".
std::string LeakReport(size_t n) { throw NotImplementedError("dataloader", "C", "LeakReport"); }

}  // namespace distlab::dataloader
