// Lab 1 (collectives), stage A -- solution: shutdown with a deadline, and a watchdog over n ranks.
//
// The one idea of this stage: Destroy is polite (it waits for pending work) and therefore can hang; Abort is
// the escape hatch. Anything that must not hang waits with a deadline and then aborts -- and it aborts every
// rank's communicator, because a rank blocked on a peer cannot be released by the peer's abort alone if it
// is not blocked in communication (it may be computing, or waiting for something else).
#include "labs/collectives/lifecycle.h"

#include <cxxabi.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <thread>
#include <typeinfo>
#include <vector>

namespace distlab::collectives {
namespace {

using Clock = std::chrono::steady_clock;

// How often a deadline wait looks at the stream again.
constexpr auto kPoll = std::chrono::milliseconds(1);

// Waits until `stream` is idle or `until` passes. True when idle.
bool WaitIdle(comm::Stream& stream, Clock::time_point until) {
  while (!stream.Idle()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

}  // namespace

absl::StatusOr<ShutdownResult> ShutdownWithDeadline(comm::Comm& comm, comm::Stream& stream,
                                                    std::chrono::milliseconds deadline) {
  if (deadline.count() < 0) {
    return absl::InvalidArgumentError("ShutdownWithDeadline: negative deadline " +
                                      std::to_string(deadline.count()) + " ms");
  }
  if (comm.released()) {
    return absl::FailedPreconditionError("ShutdownWithDeadline: rank " + std::to_string(comm.rank()) +
                                         "'s communicator was already destroyed or aborted");
  }
  const Clock::time_point until = Clock::now() + deadline;
  if (WaitIdle(stream, until)) {
    // Nothing is pending any more, so Destroy cannot block. An error the finished work reported is the
    // work's business (Synchronize reports it), not a reason to abort.
    (void)comm.Destroy();
    return ShutdownResult::kDestroyed;
  }
  // Still pending at the deadline: cancel. Abort returns at once; the cancelled work then drains from the
  // stream quickly (its operations end ABORTED). Give it a short grace period but never wait unbounded.
  (void)comm.Abort();
  WaitIdle(stream, Clock::now() + std::chrono::milliseconds(50));
  return ShutdownResult::kAborted;
}

namespace {

// What the watchdog knows about one rank.
struct RankSlot {
  RankActivity activity;
  absl::Status status;
  bool done = false;
};

// "threw std::runtime_error: boom" (the exception's dynamic type, demangled).
std::string Describe(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string type = status == 0 && name != nullptr ? name : typeid(e).name();
  std::free(name);
  return "threw " + type + ": " + e.what();
}

}  // namespace

absl::Status RunWithWatchdog(int n, const WatchedBody& body, std::chrono::milliseconds timeout,
                             comm::CommOptions options) {
  if (n < 1) return absl::InvalidArgumentError("RunWithWatchdog: n must be >= 1, got " + std::to_string(n));
  if (timeout.count() <= 0) {
    return absl::InvalidArgumentError("RunWithWatchdog: timeout must be positive, got " +
                                      std::to_string(timeout.count()) + " ms");
  }
  auto comms_or = comm::CommInitAll(n, options);
  if (!comms_or.ok()) return comms_or.status();
  std::vector<std::unique_ptr<comm::Comm>> comms = std::move(comms_or).value();
  std::vector<std::unique_ptr<comm::Stream>> streams;
  for (int r = 0; r < n; ++r) streams.push_back(std::make_unique<comm::Stream>());

  std::mutex mu;
  std::condition_variable cv;
  std::vector<RankSlot> slots(n);
  int finished = 0;
  int first_failure = -1;  // the rank whose failure came first (the cause, not a consequence)
  absl::Status first_status;

  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::Status s;
      try {
        s = body(r, *comms[r], *streams[r], slots[r].activity);
      } catch (const std::exception& e) {
        s = absl::InternalError(Describe(e));
      } catch (...) {
        s = absl::InternalError("threw a non-standard exception");
      }
      if (s.ok()) s = streams[r]->Synchronize();
      std::lock_guard<std::mutex> lock(mu);
      slots[r].status = s;
      slots[r].done = true;
      ++finished;
      if (!s.ok() && first_failure < 0) {
        first_failure = r;
        first_status = s;
      }
      cv.notify_all();
    });
  }

  // Wait for: all done, a failure, or the timeout.
  const Clock::time_point until = Clock::now() + timeout;
  std::vector<int> stuck;
  std::vector<std::string> stuck_doing;
  bool abort_all = false;
  int cause = -1;  // decided here: failures that come after the abort are its consequences
  absl::Status cause_status;
  std::string cause_doing;
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_until(lock, until, [&] { return finished == n || first_failure >= 0; });
    if (first_failure >= 0) {
      abort_all = true;
      cause = first_failure;
      cause_status = first_status;
      cause_doing = slots[cause].activity.Get();
    } else if (finished < n) {
      abort_all = true;
      for (int r = 0; r < n; ++r) {
        if (!slots[r].done) {
          stuck.push_back(r);
          stuck_doing.push_back(slots[r].activity.Get());
        }
      }
    }
  }
  // Abort EVERY communicator: a rank waiting on a peer that will never come is only released by its own
  // communicator's abort (or by the abort of a peer it is blocked on -- not something to rely on).
  if (abort_all) {
    for (auto& c : comms) (void)c->Abort();
  }
  for (auto& t : threads) t.join();

  if (!abort_all) {
    absl::Status first;
    for (auto& c : comms) {
      absl::Status s = c->Destroy();
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }
  if (cause >= 0) {
    return absl::Status(cause_status.code(), "rank " + std::to_string(cause) + " failed while '" +
                                                 cause_doing + "': " + std::string(cause_status.message()));
  }
  std::string msg;
  for (size_t i = 0; i < stuck.size(); ++i) {
    msg += (i ? "; " : "") + std::string("rank ") + std::to_string(stuck[i]) + " did not finish within " +
           std::to_string(timeout.count()) + " ms while '" + stuck_doing[i] + "'";
  }
  return absl::DeadlineExceededError(msg);
}

}  // namespace distlab::collectives
