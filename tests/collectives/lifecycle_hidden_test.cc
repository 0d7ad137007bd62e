// Hidden tests of stage A: ShutdownWithDeadline and RunWithWatchdog, including a rank that never arrives,
// a rank that throws, and a rank that is busy (not communicating) when another fails.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "labs/collectives/lifecycle.h"
#include "tests/collectives/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Opens a gate when it goes out of scope, so a held-up stream is always released before it is destroyed.
struct Gate {
  std::atomic<bool> open{false};
  ~Gate() { open = true; }
  void HoldUp(comm::Stream& s) {
    s.Enqueue([this] {
      while (!open) std::this_thread::sleep_for(milliseconds(1));
      return absl::OkStatus();
    });
  }
};

TEST(ShutdownWithDeadline, DestroysWhenWorkIsDone) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(2, testutil::Options()));
  comm::Stream s0, s1;
  float a = 1, b = 2;
  std::thread t(
      [&] { ASSERT_OK(comms[1]->AllReduce(&b, &b, 1, comm::DataType::kF32, comm::RedOp::kSum, s1)); });
  ASSERT_OK(comms[0]->AllReduce(&a, &a, 1, comm::DataType::kF32, comm::RedOp::kSum, s0));
  t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK_AND_ASSIGN(ShutdownResult res, ShutdownWithDeadline(*comms[r], r == 0 ? s0 : s1,
                                                                  testing::Scaled(milliseconds(2000))));
    EXPECT_EQ(res, ShutdownResult::kDestroyed) << "rank " << r;
    EXPECT_TRUE(comms[r]->released());
  }
  EXPECT_EQ(a, 3.0f);
}

// Work that finishes before the deadline must be waited for, not aborted.
TEST(ShutdownWithDeadline, WaitsForSlowWorkThatFinishesInTime) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, testutil::Options()));
  comm::Stream s;
  std::atomic<bool> ran{false};
  s.Enqueue([&] {
    std::this_thread::sleep_for(milliseconds(80));
    ran = true;
    return absl::OkStatus();
  });
  ASSERT_OK_AND_ASSIGN(ShutdownResult res,
                       ShutdownWithDeadline(*comms[0], s, testing::Scaled(milliseconds(3000))));
  EXPECT_EQ(res, ShutdownResult::kDestroyed);
  EXPECT_TRUE(ran) << "returned before the pending work had finished";
}

// Rank 0's share of an all-reduce waits on its stream for rank 1, whose stream is held up: the deadline
// passes, rank 0 is aborted within the bound of lifecycle.h (deadline + 400 ms, scaled), and rank 1's
// all-reduce then fails ABORTED.
TEST(ShutdownWithDeadline, AbortsStuckWorkWithinTheBound) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(2, testutil::Options()));
  comm::Stream s0, s1;
  Gate gate;
  gate.HoldUp(s1);
  float a = 1, b = 2;
  std::thread t([&] { (void)comms[1]->AllReduce(&b, &b, 1, comm::DataType::kF32, comm::RedOp::kSum, s1); });
  ASSERT_OK(comms[0]->AllReduce(&a, &a, 1, comm::DataType::kF32, comm::RedOp::kSum, s0));
  t.join();
  const auto t0 = Clock::now();
  ASSERT_OK_AND_ASSIGN(ShutdownResult res, ShutdownWithDeadline(*comms[0], s0, milliseconds(100)));
  const double ms = MsSince(t0);
  EXPECT_EQ(res, ShutdownResult::kAborted);
  EXPECT_GE(ms, 95) << "aborted before the deadline";
  EXPECT_LT(ms, 100 + testing::Scaled(milliseconds(400)).count()) << "took longer than deadline + 400 ms";
  EXPECT_TRUE(comms[0]->released());
  gate.open = true;
  absl::Status s = s1.Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  (void)comms[1]->Abort();
}

// Work that ignores the abort (a stream task that keeps running): the call still returns within the bound
// of lifecycle.h, deadline + 400 ms (scaled), not when the work ends -- an implementation that waits for
// the stream to drain takes the 5 s the task runs.
TEST(ShutdownWithDeadline, BoundedEvenWhenTheWorkIgnoresTheAbort) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, testutil::Options()));
  comm::Stream s;
  Gate gate;
  std::atomic<bool> started{false};
  s.Enqueue([&] {
    started = true;
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    while (!gate.open && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
    return absl::OkStatus();
  });
  while (!started) std::this_thread::sleep_for(milliseconds(1));
  const auto t0 = Clock::now();
  ASSERT_OK_AND_ASSIGN(ShutdownResult res, ShutdownWithDeadline(*comms[0], s, milliseconds(100)));
  const double ms = MsSince(t0);
  gate.open = true;
  EXPECT_EQ(res, ShutdownResult::kAborted);
  EXPECT_TRUE(comms[0]->released());
  EXPECT_GE(ms, 95) << "aborted before the deadline";
  EXPECT_LT(ms, 100 + testing::Scaled(milliseconds(400)).count())
      << "waited for work that ignores the abort instead of giving up after the grace period";
  (void)s.Synchronize();
}

TEST(ShutdownWithDeadline, RejectsReleasedCommAndNegativeDeadline) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, testutil::Options()));
  comm::Stream s;
  EXPECT_EQ(ShutdownWithDeadline(*comms[0], s, milliseconds(-1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(comms[0]->Destroy());
  EXPECT_EQ(ShutdownWithDeadline(*comms[0], s, milliseconds(10)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

absl::Status AllReduceOnce(comm::Comm& comm, comm::Stream& stream, float* x) {
  return comm.AllReduce(x, x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
}

TEST(RunWithWatchdog, HealthyRunReturnsOkAndResults) {
  std::vector<float> result(4, 0);
  EXPECT_OK(RunWithWatchdog(
      4,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        float x = static_cast<float>(rank + 1);
        for (int i = 0; i < 3; ++i) {
          activity.Set("all-reduce " + std::to_string(i));
          absl::Status s = AllReduceOnce(comm, stream, &x);
          if (!s.ok()) return s;
          s = stream.Synchronize();
          if (!s.ok()) return s;
        }
        result[rank] = x;
        return absl::OkStatus();
      },
      testing::Scaled(milliseconds(5000)), testutil::Options()));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(result[r], 10.0f * 4 * 4) << "rank " << r;
}

// Rank 2 throws before the all-reduce; ranks 0, 1, 3 wait in it. The run must end quickly (the watchdog
// aborts the waiting ranks) and report rank 2's exception and activity.
TEST(RunWithWatchdog, RankThatThrows) {
  const milliseconds timeout = testing::Scaled(milliseconds(4000));
  const auto t0 = Clock::now();
  absl::Status s = RunWithWatchdog(
      4,
      [](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == 2) {
          activity.Set("loading shard 17");
          throw std::runtime_error("file not found: shard-17");
        }
        activity.Set("gradient all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      timeout, testutil::Options());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 2"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("loading shard 17"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("file not found: shard-17"), absl::string_view::npos) << s;
  EXPECT_NE(s.code(), absl::StatusCode::kAborted)
      << "reported a consequence (an abort), not the cause: " << s;
  EXPECT_LT(MsSince(t0), timeout.count() / 2.0)
      << "waited for the timeout instead of reacting to the failure";
}

// A rank that returns an error: its code and message come back, prefixed with the rank and its activity.
TEST(RunWithWatchdog, RankErrorKeepsItsCode) {
  absl::Status s = RunWithWatchdog(
      3,
      [](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == 0) {
          activity.Set("validating the batch");
          return absl::InvalidArgumentError("batch of 0 samples");
        }
        activity.Set("all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      testing::Scaled(milliseconds(4000)), testutil::Options());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("rank 0"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("validating the batch"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("batch of 0 samples"), absl::string_view::npos) << s;
}

// Rank 3 never arrives at the all-reduce (it is stuck in "compute", watching only for its own
// communicator to be aborted). After the timeout every rank is aborted; the error names rank 3 and what it
// was doing, and arrives within timeout + a small bound.
TEST(RunWithWatchdog, RankThatNeverArrives) {
  const milliseconds timeout(300);
  const auto t0 = Clock::now();
  absl::Status s = RunWithWatchdog(
      4,
      [](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == 3) {
          activity.Set("stuck in the data loader");
          const auto give_up = Clock::now() + std::chrono::seconds(20);
          while (!comm.released() && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
          return absl::OkStatus();
        }
        activity.Set("all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      timeout, testutil::Options());
  const double ms = MsSince(t0);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("rank 3"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("stuck in the data loader"), absl::string_view::npos) << s;
  EXPECT_GE(ms, 290);
  EXPECT_LT(ms, 300 + testing::Scaled(milliseconds(1500)).count())
      << "the watchdog did not end the run in time";
}

// Rank 2 throws while rank 1 is busy computing (not in any communication; it only notices its OWN
// communicator being aborted). Aborting only the failed rank would leave rank 1 running until its own
// 3-second give-up; every rank must be aborted.
TEST(RunWithWatchdog, AbortReleasesEveryRank) {
  const auto t0 = Clock::now();
  std::atomic<bool> gave_up{false};
  absl::Status s = RunWithWatchdog(
      3,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == 2) {
          activity.Set("forward pass");
          std::this_thread::sleep_for(milliseconds(20));
          throw std::runtime_error("NaN in the loss");
        }
        if (rank == 1) {
          activity.Set("long computation");
          const auto give_up = Clock::now() + testing::Scaled(milliseconds(3000));
          while (!comm.released()) {
            if (Clock::now() > give_up) {
              gave_up = true;
              return absl::InternalError("rank 1 was never released");
            }
            std::this_thread::sleep_for(milliseconds(1));
          }
          return absl::AbortedError("rank 1 noticed the abort");
        }
        activity.Set("all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      testing::Scaled(milliseconds(10000)), testutil::Options());
  EXPECT_NE(s.message().find("rank 2"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("NaN in the loss"), absl::string_view::npos) << s;
  EXPECT_FALSE(gave_up) << "rank 1 was never aborted (took " << MsSince(t0) << " ms)";
}

namespace thrown {
// A type of the test's own, to check that the name is the dynamic type, fully qualified and demangled.
struct ShardError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace thrown

// lifecycle.h: "threw <type>: <what>" with the demangled dynamic type; "threw a non-standard exception"
// for anything else; code INTERNAL; the rank and its activity first.
TEST(RunWithWatchdog, ThrownTypeNamesAreDemangled) {
  auto run = [](int kind) {
    return RunWithWatchdog(
        3,
        [kind](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
          if (rank == 2) {
            activity.Set("step 4");
            if (kind == 0) throw thrown::ShardError("shard-3 is truncated");
            if (kind == 1) throw std::invalid_argument("lr < 0");
            throw std::string("not an exception class");
          }
          activity.Set("all-reduce");
          float x = 1;
          return AllReduceOnce(comm, stream, &x);
        },
        testing::Scaled(milliseconds(5000)), testutil::Options());
  };
  absl::Status s = run(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(
      s.message(),
      "rank 2 failed while 'step 4': threw distlab::collectives::(anonymous namespace)::thrown::ShardError: "
      "shard-3 is truncated")
      << s;
  s = run(1);
  EXPECT_EQ(s.message(), "rank 2 failed while 'step 4': threw std::invalid_argument: lr < 0") << s;
  s = run(2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(s.message(), "rank 2 failed while 'step 4': threw a non-standard exception") << s;
}

// Several ranks never finish: all of them, in rank order, "; "-separated (lifecycle.h).
TEST(RunWithWatchdog, EveryUnfinishedRankInRankOrder) {
  const milliseconds timeout(300);
  absl::Status s = RunWithWatchdog(
      5,
      [](int rank, comm::Comm& comm, comm::Stream&, RankActivity& activity) -> absl::Status {
        if (rank == 1 || rank == 2) return absl::OkStatus();
        activity.Set("stuck " + std::to_string(rank));
        const auto give_up = Clock::now() + std::chrono::seconds(20);
        while (!comm.released() && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
        return absl::OkStatus();
      },
      timeout, testutil::Options());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(),
            "rank 0 did not finish within 300 ms while 'stuck 0'; rank 3 did not finish within 300 ms while "
            "'stuck 3'; rank 4 did not finish within 300 ms while 'stuck 4'")
      << s;
}

// An error the stream reports at the end counts as the rank's failure.
TEST(RunWithWatchdog, StreamErrorsCount) {
  absl::Status s = RunWithWatchdog(
      2,
      [](int rank, comm::Comm&, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        activity.Set("enqueued work");
        if (rank == 1) stream.Enqueue([] { return absl::DataLossError("checksum mismatch"); });
        return absl::OkStatus();
      },
      testing::Scaled(milliseconds(4000)), testutil::Options());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("rank 1"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("checksum mismatch"), absl::string_view::npos) << s;
}

TEST(RunWithWatchdog, RejectsBadArguments) {
  auto body = [](int, comm::Comm&, comm::Stream&, RankActivity&) { return absl::OkStatus(); };
  EXPECT_EQ(RunWithWatchdog(0, body, milliseconds(100)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunWithWatchdog(2, body, milliseconds(0)).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::collectives
