// Lab 1 (collectives), stage A: the communicator lifecycle -- shutting down without hanging, and running a
// group of ranks under a watchdog that turns "one rank died / one rank is stuck" into one clear error.
//
// Vocabulary: n = ranks. A rank's "work" is what its body enqueued on its stream plus the calls it is making.
//
// What the runtime gives you (reference/comm/comm.h): Destroy waits for pending work (and blocks forever if
// that work is stuck); Abort cancels this rank's pending work at once. On the threads and gloo backends it
// also makes every peer blocked in an operation of the same communicator fail with ABORTED -- NCCL's
// ncclCommAbort does not: it stops and frees only the local rank's communicator, and peers learn nothing.
// Stream::Idle() says whether queued work has finished.
//
// What this stage leaves out: restarting after an abort (a new communicator would be needed, as with NCCL),
// and killing a rank whose body never calls into the communicator again (threads cannot be killed safely).
#ifndef DISTLAB_LABS_COLLECTIVES_LIFECYCLE_H_
#define DISTLAB_LABS_COLLECTIVES_LIFECYCLE_H_

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"

namespace distlab::collectives {

enum class ShutdownResult {
  kDestroyed,  // pending work finished within the deadline; the communicator was destroyed cleanly
  kAborted,    // the deadline passed first; the communicator was aborted and its pending work cancelled
};

// Shuts `comm` down without hanging. When the work queued on `stream` finishes within `deadline`, the
// communicator is destroyed cleanly (kDestroyed; a deadline of 0 with an idle stream destroys too);
// otherwise it is aborted and its pending work cancelled (kAborted). The bound, as the tests check it: the
// call returns before deadline + 400 ms (more under sanitizers, testing::Scaled), whatever the work does --
// also when the work ignores the abort and keeps the stream busy for seconds. (400 ms leaves room for a
// loaded machine, which can delay any thread by a few hundred ms.) An error only when the communicator was
// already released (FAILED_PRECONDITION) or the deadline is negative (INVALID_ARGUMENT).
absl::StatusOr<ShutdownResult> ShutdownWithDeadline(comm::Comm& comm, comm::Stream& stream,
                                                    std::chrono::milliseconds deadline);

// What a rank is doing right now, for error messages ("all-reduce of step 3"). Thread-safe: the rank's body
// sets it; the watchdog reads it when the rank fails or hangs.
class RankActivity {
 public:
  void Set(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = std::move(what);
  }
  std::string Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return what_;
  }

 private:
  mutable std::mutex mu_;
  std::string what_ = "starting";
};

// The body each rank runs: rank r, its communicator, its stream, and where it says what it is doing.
using WatchedBody =
    std::function<absl::Status(int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity)>;

// Runs `body` on n ranks (threads of this process, one communicator and one stream each, created with
// comm::CommInitAll(n, options)) and watches them:
//   * a rank fails when its body returns an error, throws, or its stream reports an error at the final
//     Synchronize;
//   * when any rank fails, or the run is still going `timeout` after it started, the run ends at once for
//     every rank still running: a body blocked in a communication call gets an error, and a body that is
//     not communicating at all (computing, loading data) finds its own communicator released
//     (comm.released() turns true) -- so a body that stops when it sees that is never left running;
//   * then all ranks are joined and the FIRST failure is returned (not the ABORTED errors the abort caused
//     in the others), with its status code and a message naming the rank and its activity:
//       "rank 2 failed while 'all-reduce step 1': <the rank's error message>"      (the rank's own code)
//     A body that throws fails with INTERNAL and the message "threw <type>: <what()>", where <type> is the
//     exception's dynamic type, demangled (abi::__cxa_demangle of typeid(e).name(), as the C++ runtime
//     prints it): a std::out_of_range thrown through a std::exception& reads
//       "rank 2 failed while 'all-reduce step 1': threw std::out_of_range: shard 9"
//     and anything that is not a std::exception (throw 42;) reads "... : threw a non-standard exception".
//   * at the timeout with no failure: DEADLINE_EXCEEDED naming EVERY unfinished rank, in increasing rank
//     order, each "rank R did not finish within T ms while '<activity>'" (T = timeout in ms), joined by "; ":
//       "rank 1 did not finish within 200 ms while 'loading'; rank 3 did not finish within 200 ms while
//        'waiting for the barrier'"
//   * a healthy run destroys every communicator and returns OK.
// Returns within timeout + a small bound provided every body returns once its communicator is released.
// n < 1 or a timeout <= 0 is INVALID_ARGUMENT.
absl::Status RunWithWatchdog(int n, const WatchedBody& body, std::chrono::milliseconds timeout,
                             comm::CommOptions options = {});

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_LIFECYCLE_H_
