// Lab 2 (dataloader), stage C: the process-level pieces the loader builds on -- forking a worker safely,
// turning a wait status into the message the main process shows, and the resource tracker for shared-memory
// segments.
#ifndef DISTLAB_LABS_DATALOADER_WORKER_H_
#define DISTLAB_LABS_DATALOADER_WORKER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::dataloader {

// Forks a child that runs body() and ends with the code it returns (1 if it throws, after printing the
// exception to stderr). Seen from outside, the child ends the way a forked worker has to:
//   * what the parent had written to a stdio stream before the call appears once, never a second time from
//     the child; everything the child wrote appears;
//   * the parent's atexit handlers and static destructors never run in the child: they belong to the
//     parent's program, which is still running.
// Returns the child's pid; fork failure -> Internal naming errno.
absl::StatusOr<pid_t> ForkWorker(const std::function<int()>& body);

// What the main process says about a worker that ended, from waitpid's status:
//   exited with n         -> "DataLoader worker (pid P) exited unexpectedly with exit code n"
//   killed by signal s    -> "DataLoader worker (pid P) is killed by signal: <strsignal(s)>"
//                            for SIGBUS followed by ". This can be caused by insufficient shared memory
//                            (/dev/shm): ..." (a hint to enlarge /dev/shm)
std::string DescribeWorkerExit(pid_t pid, int wait_status);

// "Caught <type> in DataLoader worker process <id>. Original: <message>" (the loader appends " (worker pid
// P)"; loader.h says what <type> and <message> are).
std::string DescribeWorkerException(const std::string& type, int worker_id, const std::string& message);

// The resource tracker: unlinks every POSIX shared-memory segment whose name starts with `prefix` (the
// names under /dev/shm, without the leading '/') and returns the names it unlinked (sorted).
absl::StatusOr<std::vector<std::string>> ReclaimSegments(const std::string& prefix);

// "resource_tracker: There appear to be N leaked shared_memory objects to clean up at shutdown"; "" for N =
// 0.
std::string LeakReport(size_t n);

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_WORKER_H_
