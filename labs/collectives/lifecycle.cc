// Lab 1 (collectives), stage A: the communicator lifecycle. Your code goes here.
//
// Read first: lifecycle.h (the contracts) and the Destroy / Abort paragraph of reference/comm/comm.h.
// Public tests: lifecycle_test.cc. Run: bazel test //labs/collectives:lifecycle_test
#include "labs/collectives/lifecycle.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage A): ShutdownWithDeadline -- contract: lifecycle.h (ShutdownWithDeadline); idea:
//   notes/01-collectives.md §1.
//   Tools: Stream::Idle() (the runtime has no wait with a timeout: poll it with a short sleep),
//   Comm::Destroy, Comm::Abort, Comm::released(). Nothing can interrupt a call once it blocks.
//   Which of your waits could last as long as the stuck work itself?
absl::StatusOr<ShutdownResult> ShutdownWithDeadline(comm::Comm& comm, comm::Stream& stream,
                                                    std::chrono::milliseconds deadline) {
  return Unimplemented("collectives", "A", "ShutdownWithDeadline");
}

// TODO(collectives stage A): RunWithWatchdog -- contract: lifecycle.h (RunWithWatchdog); idea:
//   notes/01-collectives.md §1.
//   Tools: comm::CommInitAll(n, options), one comm::Stream per rank, std::thread, a std::mutex with a
//   std::condition_variable for the main thread's wait, abi::__cxa_demangle (<cxxabi.h>) for a type's name.
//   When rank 2 throws, what is each other rank doing at that moment, and what tells it the run is over?
absl::Status RunWithWatchdog(int n, const WatchedBody& body, std::chrono::milliseconds timeout,
                             comm::CommOptions options) {
  return Unimplemented("collectives", "A", "RunWithWatchdog");
}

}  // namespace distlab::collectives
