// Public tests of stage A (lifecycle.h). The hidden tests check more cases and the error messages closely.
#include "labs/collectives/lifecycle.h"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using std::chrono::milliseconds;

// One rank alone, nothing queued: the stream is idle, so the shutdown destroys at once.
TEST(ShutdownWithDeadline, IdleStreamIsDestroyed) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1));
  comm::Stream stream;
  ASSERT_OK_AND_ASSIGN(ShutdownResult result, ShutdownWithDeadline(*comms[0], stream, milliseconds(100)));
  EXPECT_EQ(result, ShutdownResult::kDestroyed);
  EXPECT_TRUE(comms[0]->released());
}

// Two ranks launch an all-reduce, but rank 1's stream is held up by other work, so rank 0's share waits
// on its stream for a peer that does not come:
//
//   rank 0 stream: [ AllReduce ...waiting for rank 1... ]     <- ShutdownWithDeadline(50 ms) -> kAborted
//   rank 1 stream: [ busy (gate) ][ AllReduce ]
TEST(ShutdownWithDeadline, StuckWorkIsAborted) {
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(2));
  comm::Stream s0, s1;
  std::atomic<bool> gate{false};
  struct OpenAtExit {  // whatever happens below, rank 1's stream is released before it is destroyed
    std::atomic<bool>& gate;
    ~OpenAtExit() { gate = true; }
  } open_at_exit{gate};
  s1.Enqueue([&] {
    while (!gate) std::this_thread::sleep_for(milliseconds(1));
    return absl::OkStatus();
  });
  float a = 1, b = 2;
  std::thread t1([&] { (void)comms[1]->AllReduce(&b, &b, 1, comm::DataType::kF32, comm::RedOp::kSum, s1); });
  ASSERT_OK(comms[0]->AllReduce(&a, &a, 1, comm::DataType::kF32, comm::RedOp::kSum, s0));
  t1.join();
  ASSERT_OK_AND_ASSIGN(ShutdownResult result, ShutdownWithDeadline(*comms[0], s0, milliseconds(50)));
  EXPECT_EQ(result, ShutdownResult::kAborted);
  gate = true;
  (void)s1.Synchronize();
  (void)comms[1]->Abort();
}

TEST(RunWithWatchdog, HealthyRunIsOk) {
  EXPECT_OK(RunWithWatchdog(
      3,
      [](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        activity.Set("all-reduce");
        static thread_local float x;
        x = static_cast<float>(rank);
        return comm.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
      },
      testing::Scaled(milliseconds(5000))));
}

// Rank 1 throws while the others wait for it in an all-reduce: the watchdog aborts them and reports rank
// 1's exception, not the ABORTED errors of the others.
TEST(RunWithWatchdog, ThrowingRankIsReported) {
  absl::Status s = RunWithWatchdog(
      3,
      [](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == 1) {
          activity.Set("computing the loss");
          throw std::runtime_error("boom");
        }
        activity.Set("all-reduce");
        static thread_local float x;
        return comm.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
      },
      testing::Scaled(milliseconds(5000)));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("computing the loss"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("boom"), absl::string_view::npos) << s;
}

// Rank 3 throws 20 ms in, while the other three are busy in three different ways. Each must be released at
// once, and the run reports rank 3's exception -- not the ABORTED errors, and not rank 1's own give-up:
//
//   t = 0      rank 0: all-reduce ..... waits for rank 3, which never joins ....... -> fails (ABORTED)
//              rank 1: "long computation": polls comm.released() every ms ........ -> sees it, returns
//                      (gives up by itself after 3 s: that must not happen)
//              rank 2: Send to rank 0 ..... rank 0 never posts its Recv ............ -> fails (ABORTED)
//   t = 20 ms  rank 3: throws std::runtime_error("NaN in the loss")
//
//   returns:   INTERNAL "rank 3 failed while 'forward pass': threw std::runtime_error: NaN in the loss"
TEST(RunWithWatchdog, EveryRankIsReleasedWhateverItIsDoing) {
  std::atomic<bool> gave_up{false};
  absl::Status s = RunWithWatchdog(
      4,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        static thread_local float x;
        x = 1;
        switch (rank) {
          case 0:
            activity.Set("all-reduce");
            return comm.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
          case 1: {
            activity.Set("long computation");
            const auto give_up = std::chrono::steady_clock::now() + testing::Scaled(milliseconds(3000));
            while (!comm.released()) {
              if (std::chrono::steady_clock::now() > give_up) {
                gave_up = true;
                return absl::InternalError("rank 1 was never released");
              }
              std::this_thread::sleep_for(milliseconds(1));
            }
            return absl::AbortedError("rank 1 saw its communicator released");
          }
          case 2:
            activity.Set("send to rank 0");
            return comm.Send(&x, 1, comm::DataType::kF32, 0, stream);
          default:
            activity.Set("forward pass");
            std::this_thread::sleep_for(milliseconds(20));
            throw std::runtime_error("NaN in the loss");
        }
      },
      testing::Scaled(milliseconds(10000)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(s.message(), "rank 3 failed while 'forward pass': threw std::runtime_error: NaN in the loss")
      << s;
  EXPECT_FALSE(gave_up) << "rank 1 was still running 3 s after rank 3 failed: nothing released it";
}

// A thrown exception is described by its dynamic type, demangled, and its what(): std::out_of_range, not
// std::exception and not the mangled "St12out_of_range". Something that is not a std::exception has no
// what(): "threw a non-standard exception". The code is INTERNAL.
TEST(RunWithWatchdog, ThrownTypeIsNamedDemangled) {
  auto run = [](bool standard) {
    return RunWithWatchdog(
        2,
        [standard](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
          if (rank == 1) {
            activity.Set("reading shards");
            if (standard) throw std::out_of_range("shard 9");
            throw 42;
          }
          activity.Set("all-reduce");
          static thread_local float x;
          return comm.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
        },
        testing::Scaled(milliseconds(5000)));
  };
  absl::Status s = run(true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(s.message(), "rank 1 failed while 'reading shards': threw std::out_of_range: shard 9") << s;
  s = run(false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(s.message(), "rank 1 failed while 'reading shards': threw a non-standard exception") << s;
}

// Ranks 1 and 3 never finish; 0 and 2 do. At the timeout the error names every unfinished rank, in rank
// order, joined by "; ", each with the timeout in ms and its activity.
TEST(RunWithWatchdog, EveryUnfinishedRankInRankOrder) {
  const milliseconds timeout = testing::Scaled(milliseconds(400));
  absl::Status s = RunWithWatchdog(
      4,
      [](int rank, comm::Comm& comm, comm::Stream&, RankActivity& activity) -> absl::Status {
        if (rank % 2 == 0) return absl::OkStatus();
        activity.Set(rank == 1 ? "loading" : "waiting for the barrier");
        while (!comm.released()) std::this_thread::sleep_for(milliseconds(1));
        return absl::OkStatus();
      },
      timeout);
  const std::string t = std::to_string(timeout.count());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(), "rank 1 did not finish within " + t +
                             " ms while 'loading'; rank 3 did not finish within " + t +
                             " ms while 'waiting for the barrier'")
      << s;
}

}  // namespace
}  // namespace distlab::collectives
