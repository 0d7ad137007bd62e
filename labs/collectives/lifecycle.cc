// Lab 1 (collectives), stage A: the communicator lifecycle. Your code goes here.
//
// Read first: lifecycle.h (the contracts) and the Destroy / Abort paragraph of reference/comm/comm.h.
// Public tests: lifecycle_test.cc. Run: bazel test //labs/collectives:lifecycle_test
#include "labs/collectives/lifecycle.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage A): ShutdownWithDeadline.
//   1. A negative deadline is INVALID_ARGUMENT; a communicator already released is FAILED_PRECONDITION.
//   2. Wait -- at most `deadline` -- for the stream to become idle (Stream::Idle; poll with a short sleep).
//   3. Idle in time: nothing can block Destroy any more; destroy and return kDestroyed.
//   4. Not idle at the deadline: Destroy would wait forever for stuck work. Abort instead, give the
//      cancelled work a short, bounded moment to drain, and return kAborted.
//   Edge cases: deadline 0 with an idle stream destroys; the total time stays under deadline + 400 ms
//   (a grace of tens of ms after the abort, never a wait for the work).
absl::StatusOr<ShutdownResult> ShutdownWithDeadline(comm::Comm& comm, comm::Stream& stream,
                                                    std::chrono::milliseconds deadline) {
  return Unimplemented("collectives", "A", "ShutdownWithDeadline");
}

// TODO(collectives stage A): RunWithWatchdog.
//   1. Validate n >= 1 and timeout > 0. Create the communicators with comm::CommInitAll(n, options) and
//      one Stream per rank.
//   2. Start one thread per rank: run body(rank, comm, stream, activity), turn an exception into an error
//      ("threw <type>: <what>", <type> demangled as lifecycle.h says; a non-std exception has its own
//      text), and on success synchronize the stream (its errors count too).
//   3. The main thread waits (a condition variable) until every rank is done, one has failed, or the
//      timeout has passed -- whichever comes first. Remember WHICH failure came first.
//   4. On a failure or the timeout: abort EVERY rank's communicator (think: which ranks are still blocked,
//      and on what? a rank waiting for a peer that will never come is not released by anyone else).
//   5. Join all threads. Healthy run: destroy the communicators, return OK. Otherwise return the first
//      failure with the failing rank and its RankActivity in the message, keeping its code; on timeout a
//      DEADLINE_EXCEEDED naming every unfinished rank and what it was doing.
absl::Status RunWithWatchdog(int n, const WatchedBody& body, std::chrono::milliseconds timeout,
                             comm::CommOptions options) {
  return Unimplemented("collectives", "A", "RunWithWatchdog");
}

}  // namespace distlab::collectives
