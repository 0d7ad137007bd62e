// Lab 2 (dataloader), stage C: forking a worker, reading how it ended, and the resource tracker.
// Read notes/02-dataloader.md section 3 (how a process ends, why fork is dangerous with threads) first.
// Until a function is done it fails with "TODO(dataloader stage C): <name>".
// Stuck? ./labctl hint dataloader C
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

// TODO(dataloader stage C): ForkWorker -- contract: worker.h (ForkWorker); idea: notes/02-dataloader.md §3.
//   Tools: fork(2), fflush(nullptr), exit(3) and _exit(2) (they differ in what they run on the way out).
//   Errors: fork fails -> Internal naming strerror(errno).
//   The child is a copy of the parent's whole process, buffers and exit handlers included: whose are they?
absl::StatusOr<pid_t> ForkWorker(const std::function<int()>& body) {
  return Unimplemented("dataloader", "C", "ForkWorker");
}

// TODO(dataloader stage C): DescribeWorkerExit -- contract: worker.h (DescribeWorkerExit: the exact texts);
//   idea: notes/02-dataloader.md §3. Tools: WIFEXITED, WEXITSTATUS, WIFSIGNALED, WTERMSIG (<sys/wait.h>) and
//   strsignal(3), which names a signal.
std::string DescribeWorkerExit(pid_t pid, int wait_status) {
  throw NotImplementedError("dataloader", "C", "DescribeWorkerExit");
}

// TODO(dataloader stage C): DescribeWorkerException -- contract: worker.h (DescribeWorkerException) and
//   loader.h (what <type> and <message> are).
std::string DescribeWorkerException(const std::string& type, int worker_id, const std::string& message) {
  throw NotImplementedError("dataloader", "C", "DescribeWorkerException");
}

// TODO(dataloader stage C): ReclaimSegments -- contract: worker.h (ReclaimSegments); idea:
//   notes/02-dataloader.md §3. Tools: opendir/readdir on /dev/shm, where a segment made by shm_open("/x")
//   shows as "x"; shm_unlink. Errors: an empty prefix -> InvalidArgument (it would match every segment).
//   Another process may unlink a name between your listing and your shm_unlink: is that an error?
absl::StatusOr<std::vector<std::string>> ReclaimSegments(const std::string& prefix) {
  return Unimplemented("dataloader", "C", "ReclaimSegments");
}

// TODO(dataloader stage C): LeakReport -- contract: worker.h (LeakReport: the exact text, Python's).
std::string LeakReport(size_t n) { throw NotImplementedError("dataloader", "C", "LeakReport"); }

}  // namespace distlab::dataloader
