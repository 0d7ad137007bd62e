// The semantic rules of the threads backend (comm.h's header comment), one test per rule: Send/Recv
// rendezvous, the reproducible send-before-recv deadlock and its rescue by a group, one thread driving every
// rank, mismatch messages, the watchdog, Abort, Destroy, calls on released communicators, Split, Stats,
// argument errors and CommInitRank.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "tools/testing/test_support.h"

namespace distlab::comm {
namespace {

using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

CommOptions Opts(const std::string& name, milliseconds timeout = std::chrono::seconds(20)) {
  CommOptions o;
  o.name = name;
  o.timeout = timeout;
  return o;
}

// Runs f(rank) on one thread per rank; returns their statuses.
template <typename F>
std::vector<absl::Status> OnThreads(int n, F f) {
  std::vector<absl::Status> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { out[r] = f(r); });
  for (auto& t : threads) t.join();
  return out;
}

std::vector<std::unique_ptr<Stream>> Streams(int n) {
  std::vector<std::unique_ptr<Stream>> s;
  for (int r = 0; r < n; ++r) s.push_back(std::make_unique<Stream>());
  return s;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(SendRecv, DataArrivesAndCountersCountPayload) {
  std::vector<int32_t> src(1000), dst(1000, -1);
  std::iota(src.begin(), src.end(), 5);
  std::vector<Stats> stats(2);
  ASSERT_OK(FirstError(RunRanks(
      2,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        if (r == 0) {
          RETURN_IF_ERROR(comm.Send(src.data(), src.size(), DataType::kI32, 1, s));
        } else {
          RETURN_IF_ERROR(comm.Recv(dst.data(), dst.size(), DataType::kI32, 0, s));
        }
        RETURN_IF_ERROR(s.Synchronize());
        stats[r] = comm.stats();
        return absl::OkStatus();
      },
      Opts("p2p"))));
  EXPECT_EQ(dst, src);
  EXPECT_EQ(stats[0].sends, 1u);
  EXPECT_EQ(stats[0].bytes_sent, 4000u);
  EXPECT_EQ(stats[0].recvs, 0u);
  EXPECT_EQ(stats[1].recvs, 1u);
  EXPECT_EQ(stats[1].bytes_received, 4000u);
  EXPECT_EQ(stats[1].collective_calls, 0u);
}

TEST(SendRecv, SendBeforeRecvOutsideAGroupDeadlocksAndTheWatchdogNamesBoth) {
  testing::Activity activity("two ranks that both Send first (the watchdog must end it)");
  std::vector<float> a(64, 1), b(64, 2), ra(64), rb(64);
  const auto t0 = std::chrono::steady_clock::now();
  auto statuses = RunRanks(
      2,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        absl::Status sent = comm.Send(r == 0 ? a.data() : b.data(), 64, DataType::kF32, 1 - r, s);
        EXPECT_FALSE(comm.GetAsyncError().ok()) << "the timeout must leave the communicator in error";
        if (!sent.ok()) return sent;
        return comm.Recv(r == 0 ? ra.data() : rb.data(), 64, DataType::kF32, 1 - r, s);
      },
      Opts("deadlock", milliseconds(300)));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded) << statuses[r];
    EXPECT_THAT(Msg(statuses[r]), AllOf(HasSubstr("Send #1"), HasSubstr("rank 0"), HasSubstr("rank 1"),
                                        HasSubstr("matching Recv"), HasSubstr("'deadlock'")));
  }
  EXPECT_LT(SecondsSince(t0), 20 * testing::TimeoutScale());
}

TEST(SendRecv, AGroupRescuesTheRingStep) {
  for (int n : {2, 3, 5}) {
    std::vector<std::vector<double>> send(n), recv(n);
    for (int r = 0; r < n; ++r) send[r].assign(333, r + 0.5), recv[r].assign(333, -1);
    ASSERT_OK(FirstError(RunRanks(
        n,
        [&](int r, Comm& comm, Stream& s) -> absl::Status {
          // Send first, then Recv: deadlocks outside a group, progresses together inside one.
          RETURN_IF_ERROR(GroupStart());
          RETURN_IF_ERROR(comm.Send(send[r].data(), 333, DataType::kF64, (r + 1) % n, s));
          RETURN_IF_ERROR(comm.Recv(recv[r].data(), 333, DataType::kF64, (r + n - 1) % n, s));
          return GroupEnd();
        },
        Opts("ring"))));
    for (int r = 0; r < n; ++r) EXPECT_EQ(recv[r], send[(r + n - 1) % n]) << "n=" << n << " rank " << r;
  }
}

TEST(SendRecv, SendToSelfWorksOnlyInsideAGroup) {
  auto comms = CommInitAll(1, Opts("self"));
  ASSERT_OK(comms);
  Comm& comm = *(*comms)[0];
  Stream s;
  std::vector<uint8_t> in = {1, 2, 3}, out(3);
  absl::Status outside = comm.Send(in.data(), 3, DataType::kU8, 0, s);
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(outside), HasSubstr("GroupStart"));
  ASSERT_OK(GroupStart());
  ASSERT_OK(comm.Send(in.data(), 3, DataType::kU8, 0, s));
  ASSERT_OK(comm.Recv(out.data(), 3, DataType::kU8, 0, s));
  ASSERT_OK(GroupEnd());
  ASSERT_OK(s.Synchronize());
  EXPECT_EQ(out, in);
  EXPECT_OK(comm.Destroy());
}

TEST(SendRecv, MismatchedCountOrDtypeNamesBothRanks) {
  auto statuses = RunRanks(
      4,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        std::vector<float> buf(1024);
        if (r == 2) return comm.Send(buf.data(), 1024, DataType::kF32, 3, s);
        if (r == 3) return comm.Recv(buf.data(), 1000, DataType::kF32, 2, s);
        return absl::OkStatus();
      },
      Opts("mm"));
  for (int r : {2, 3}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(statuses[r]), HasSubstr("rank 2 sent 1024 f32 to rank 3, which expected 1000 f32: counts "
                                            "must match in Send/Recv"));
  }
  statuses = RunRanks(
      2,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        std::vector<double> buf(8);
        if (r == 0) return comm.Send(buf.data(), 8, DataType::kF64, 1, s);
        return comm.Recv(buf.data(), 8, DataType::kI64, 0, s);
      },
      Opts("mm2"));
  EXPECT_THAT(Msg(statuses[1]),
              HasSubstr("rank 0 sent 8 f64 to rank 1, which expected 8 i64: dtypes must match"));
}

TEST(Groups, OneThreadDrivesEveryRank) {
  const int n = 4;
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(n, Opts("driver")));
  auto streams = Streams(n);
  std::vector<std::vector<int64_t>> bufs(n), ring(n);
  for (int r = 0; r < n; ++r) bufs[r].assign(100, r + 1), ring[r].assign(100, 0);
  // Without a group the first AllReduce would wait for ranks this thread has not reached yet.
  ASSERT_OK(GroupStart());
  for (int r = 0; r < n; ++r) {
    ASSERT_OK(
        comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), 100, DataType::kI64, RedOp::kSum, *streams[r]));
  }
  ASSERT_OK(GroupEnd());
  ASSERT_OK(GroupStart());
  for (int r = 0; r < n; ++r) {
    ASSERT_OK(comms[r]->Send(bufs[r].data(), 100, DataType::kI64, (r + 1) % n, *streams[r]));
    ASSERT_OK(comms[r]->Recv(ring[r].data(), 100, DataType::kI64, (r + n - 1) % n, *streams[r]));
  }
  ASSERT_OK(GroupEnd());
  for (int r = 0; r < n; ++r) {
    ASSERT_OK(streams[r]->Synchronize());
    EXPECT_EQ(bufs[r], std::vector<int64_t>(100, 10));
    EXPECT_EQ(ring[r], std::vector<int64_t>(100, 10));
  }
  for (auto& c : comms) EXPECT_OK(c->Destroy());
}

TEST(Groups, NestAndReportErrors) {
  EXPECT_EQ(GroupEnd().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(2, Opts("nest")));
  auto streams = Streams(2);
  std::vector<float> x(10, 1), y(10, 2);
  ASSERT_OK(GroupStart());
  ASSERT_OK(GroupStart());
  ASSERT_OK(comms[0]->AllReduce(x.data(), x.data(), 10, DataType::kF32, RedOp::kMax, *streams[0]));
  ASSERT_OK(GroupEnd());  // inner: launches nothing yet
  ASSERT_OK(comms[1]->AllReduce(y.data(), y.data(), 10, DataType::kF32, RedOp::kMax, *streams[1]));
  ASSERT_OK(GroupEnd());
  for (auto& s : streams) ASSERT_OK(s->Synchronize());
  EXPECT_EQ(x, std::vector<float>(10, 2));
  // An argument error inside a group is returned by the call and again by GroupEnd.
  ASSERT_OK(GroupStart());
  EXPECT_EQ(comms[0]->Send(nullptr, 10, DataType::kF32, 1, *streams[0]).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status end = GroupEnd();
  EXPECT_EQ(end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(end), HasSubstr("null"));
}

// Grouped: the group is closed whatever the calls did, and the first error wins.
TEST(Groups, GroupedAlwaysClosesTheGroupAndReturnsTheFirstError) {
  EXPECT_EQ(Grouped([] { return absl::OkStatus(); }).code(), absl::StatusCode::kOk);
  const absl::Status failed = Grouped([] { return absl::DataLossError("the body's own error"); });
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(GroupEnd().code(), absl::StatusCode::kFailedPrecondition);  // no group left open
  EXPECT_THROW(Grouped([]() -> absl::Status { throw std::runtime_error("thrown"); }), std::runtime_error);
  EXPECT_EQ(GroupEnd().code(), absl::StatusCode::kFailedPrecondition);
  // A call's error the body ignores still comes back, from GroupEnd.
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(2, Opts("grouped")));
  Stream stream;
  const absl::Status ignored = Grouped([&] {
    comms[0]->Send(nullptr, 10, DataType::kF32, 1, stream).IgnoreError();
    return absl::OkStatus();
  });
  EXPECT_EQ(ignored.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(ignored), HasSubstr("null"));
}

// SendRecv: one ring step on 4 ranks (each sends to r+1, receives from r-1), then an empty step, which sends
// nothing at all.
TEST(SendRecv, OneRingStepOnFourRanksAndEmptyMessagesAreSkipped) {
  const int n = 4;
  std::vector<std::vector<int32_t>> got(n, std::vector<int32_t>(3, -1));
  std::vector<Stats> stats(n);
  ASSERT_OK(FirstError(RunRanks(n, [&](int r, Comm& comm, Stream& stream) -> absl::Status {
    const std::vector<int32_t> mine(3, 10 * r);
    RETURN_IF_ERROR(SendRecv(comm, mine.data(), 3, (r + 1) % n, got[r].data(), 3, (r + n - 1) % n,
                             DataType::kI32, stream));
    RETURN_IF_ERROR(stream.Synchronize());
    RETURN_IF_ERROR(
        SendRecv(comm, nullptr, 0, (r + 1) % n, nullptr, 0, (r + n - 1) % n, DataType::kI32, stream));
    stats[r] = comm.stats();
    return absl::OkStatus();
  })));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r], std::vector<int32_t>(3, 10 * ((r + n - 1) % n))) << "rank " << r;
    EXPECT_EQ(stats[r].sends, 1u);
    EXPECT_EQ(stats[r].recvs, 1u);
    EXPECT_EQ(stats[r].bytes_sent, 12u);
  }
}

TEST(Collectives, MismatchIsAnErrorOnEveryRankNamingEachCall) {
  std::vector<std::vector<float>> bufs(2, std::vector<float>(1024));  // outlive the stream work
  auto statuses = RunRanks(
      2,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        std::vector<float>& buf = bufs[r];
        RETURN_IF_ERROR(comm.AllReduce(buf.data(), buf.data(), 16, DataType::kF32, RedOp::kSum, s));
        RETURN_IF_ERROR(comm.Broadcast(buf.data(), buf.data(), 16, DataType::kF32, 0, s));
        return comm.AllReduce(buf.data(), buf.data(), r == 0 ? 1024 : 1000, DataType::kF32, RedOp::kSum, s);
      },
      Opts("x"));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        Msg(statuses[r]),
        "collective #3 mismatch on comm 'x': rank 0 called AllReduce(count=1024, f32, sum), rank 1 called "
        "AllReduce(count=1000, f32, sum)");
  }
  statuses = RunRanks(
      3,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        std::vector<float> buf(8);
        if (r == 1) return comm.Reduce(buf.data(), buf.data(), 8, DataType::kF32, RedOp::kMax, 2, s);
        return comm.Broadcast(buf.data(), buf.data(), 8, DataType::kF32, r, s);
      },
      Opts("y"));
  EXPECT_THAT(Msg(statuses[0]),
              HasSubstr("rank 0 called Broadcast(count=8, f32, root=0), rank 1 called "
                        "Reduce(count=8, f32, max, root=2), rank 2 called Broadcast(count=8, "
                        "f32, root=2)"));
}

TEST(Watchdog, ARankThatNeverArrivesIsNamed) {
  testing::Activity activity("AllReduce with a missing rank (the watchdog must end it)");
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(3, Opts("wd", milliseconds(300))));
  auto streams = Streams(3);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(32, 1));
  auto statuses = OnThreads(2, [&](int r) {
    RETURN_IF_ERROR(
        comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), 32, DataType::kF32, RedOp::kSum, *streams[r]));
    return comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), 32, DataType::kF32, RedOp::kSum, *streams[r]);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(Msg(statuses[r]), AllOf(HasSubstr("AllReduce #1 on comm 'wd'"),
                                        HasSubstr("arrived: ranks 0, 1"), HasSubstr("missing: rank 2")));
  }
  // The communicator is in error on every rank, including the one that never came.
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(comms[r]->GetAsyncError().code(), absl::StatusCode::kDeadlineExceeded);
  absl::Status late =
      comms[2]->AllReduce(bufs[2].data(), bufs[2].data(), 32, DataType::kF32, RedOp::kSum, *streams[2]);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << "a late rank must fail at once, not wait";
  for (auto& c : comms) EXPECT_OK(c->Destroy());
}

TEST(Watchdog, StreamSideWaitsTimeOutAndDestroyReportsIt) {
  testing::Activity activity("an AllReduce whose peer stream is blocked (the watchdog must end it)");
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(2, Opts("sw", milliseconds(300))));
  auto streams = Streams(2);
  std::atomic<bool> release{false};
  // Rank 1's stream is busy with host work, so its stream never reaches the AllReduce in time.
  streams[1]->Enqueue([&] {
    while (!release.load()) std::this_thread::sleep_for(milliseconds(5));
    return absl::OkStatus();
  });
  std::vector<std::vector<float>> bufs(2, std::vector<float>(16, 1));
  auto statuses = OnThreads(2, [&](int r) {
    return comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), 16, DataType::kF32, RedOp::kSum, *streams[r]);
  });
  ASSERT_OK(statuses[0]);  // the launch succeeded: both ranks called
  ASSERT_OK(statuses[1]);
  absl::Status destroyed = comms[0]->Destroy();  // waits for rank 0's stream work, which times out
  EXPECT_EQ(destroyed.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Msg(destroyed), AllOf(HasSubstr("AllReduce #1"), HasSubstr("not reached: rank 1")));
  EXPECT_EQ(streams[0]->Synchronize().code(), absl::StatusCode::kDeadlineExceeded);
  release = true;
  EXPECT_EQ(streams[1]->Synchronize().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(comms[1]->Destroy().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(Abort, FromAnotherThreadUnblocksEveryPeerWithAborted) {
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(3, Opts("ab")));  // 20 s timeout: only Abort can end this
  auto streams = Streams(3);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(16, 1));
  const auto t0 = std::chrono::steady_clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_OK(comms[2]->Abort());
  });
  auto statuses = OnThreads(2, [&](int r) {
    return comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), 16, DataType::kF32, RedOp::kSum, *streams[r]);
  });
  aborter.join();
  EXPECT_LT(SecondsSince(t0), 10.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kAborted);
    EXPECT_THAT(Msg(statuses[r]), HasSubstr("rank 2 aborted comm 'ab'"));
    EXPECT_EQ(comms[r]->GetAsyncError().code(), absl::StatusCode::kAborted);
  }
  EXPECT_TRUE(comms[2]->released());
  EXPECT_FALSE(comms[0]->released());
  EXPECT_EQ(comms[2]->GetAsyncError().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(comms[2]->Abort().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(comms[2]
                ->AllReduce(bufs[2].data(), bufs[2].data(), 16, DataType::kF32, RedOp::kSum, *streams[2])
                .code(),
            absl::StatusCode::kFailedPrecondition);
  for (int r = 0; r < 2; ++r) EXPECT_OK(comms[r]->Destroy());
}

TEST(Abort, WakesThisRanksOwnBlockedCallAndCancelsStreamWork) {
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(2, Opts("self-abort")));
  auto streams = Streams(2);
  std::vector<float> buf(8, 1);
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_OK(comms[0]->Abort());
  });
  absl::Status sent = comms[0]->Send(buf.data(), 8, DataType::kF32, 1, *streams[0]);  // nobody receives
  aborter.join();
  EXPECT_EQ(sent.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(sent), HasSubstr("rank 0 aborted"));
  // The peer's calls fail at once with the abort.
  EXPECT_EQ(comms[1]->Send(buf.data(), 8, DataType::kF32, 0, *streams[1]).code(), absl::StatusCode::kAborted);
  EXPECT_OK(streams[0]->Synchronize());
  EXPECT_OK(comms[1]->Destroy());
}

TEST(RunRanks, AFailingRankAbortsSoBlockedPeersFailAtOnceAndFirstErrorNamesTheCause) {
  testing::Activity activity("rank 0 blocked in an AllReduce that rank 1 never joins");
  const auto t0 = std::chrono::steady_clock::now();
  auto statuses = RunRanks(
      2,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        if (r == 1) return absl::DataLossError("rank 1 found a corrupt shard");
        std::vector<int32_t> buf(16, 1);
        RETURN_IF_ERROR(comm.AllReduce(buf.data(), buf.data(), 16, DataType::kI32, RedOp::kSum, s));
        return s.Synchronize();
      },
      Opts("giveup", std::chrono::seconds(120)));  // far longer than the bound checked below
  EXPECT_LT(SecondsSince(t0), 10 * testing::TimeoutScale())
      << "the peer waited for the timeout, not the abort";
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kAborted) << statuses[0];
  EXPECT_THAT(Msg(statuses[0]), HasSubstr("rank 1 aborted comm 'giveup'"));
  EXPECT_EQ(FirstError(statuses).code(), absl::StatusCode::kDataLoss) << "FirstError must name the cause";
}

TEST(Destroy, WaitsForPendingWorkAndLaterCallsFail) {
  const int n = 3;
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(n, Opts("destroy")));
  auto streams = Streams(n);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(1 << 14, 2));
  auto statuses = OnThreads(n, [&](int r) -> absl::Status {
    // Slow host work first, so the AllReduce is still pending when Destroy is called.
    streams[r]->Enqueue([] {
      std::this_thread::sleep_for(milliseconds(200));
      return absl::OkStatus();
    });
    RETURN_IF_ERROR(comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), DataType::kI32,
                                        RedOp::kProd, *streams[r]));
    EXPECT_FALSE(streams[r]->Idle());
    RETURN_IF_ERROR(comms[r]->Destroy());
    EXPECT_EQ(bufs[r][0], 8) << "Destroy returned before the pending AllReduce ran";
    return absl::OkStatus();
  });
  for (auto& s : statuses) EXPECT_OK(s);
  std::vector<int32_t> x(4);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(comms[r]->released());
    for (absl::Status s :
         {comms[r]->AllReduce(x.data(), x.data(), 4, DataType::kI32, RedOp::kSum, *streams[r]),
          comms[r]->Send(x.data(), 4, DataType::kI32, (r + 1) % n, *streams[r]),
          comms[r]->Recv(x.data(), 4, DataType::kI32, (r + 1) % n, *streams[r]), comms[r]->Destroy(),
          comms[r]->Abort(), comms[r]->GetAsyncError(), comms[r]->Split(0, 0).status()}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      EXPECT_THAT(Msg(s), HasSubstr("destroyed"));
    }
  }
}

TEST(Destroy, BlockedByStuckWorkIsEndedByAbortFromAnotherThread) {
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(2, Opts("stuck")));  // 20 s: only Abort ends this in time
  auto streams = Streams(2);
  std::atomic<bool> release{false};
  streams[1]->Enqueue([&] {  // rank 1's stream never reaches the AllReduce while this runs
    while (!release.load()) std::this_thread::sleep_for(milliseconds(2));
    return absl::OkStatus();
  });
  std::vector<std::vector<float>> bufs(2, std::vector<float>(64, 1));
  ASSERT_OK(GroupStart());
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(
        comms[r]->AllReduce(bufs[r].data(), bufs[r].data(), 64, DataType::kF32, RedOp::kSum, *streams[r]));
  }
  ASSERT_OK(GroupEnd());
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status destroyed;
  std::thread destroyer([&] { destroyed = comms[0]->Destroy(); });  // waits for rank 0's pending AllReduce
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_OK(comms[0]->Abort());
  destroyer.join();
  EXPECT_LT(SecondsSince(t0), 10.0);
  EXPECT_EQ(destroyed.code(), absl::StatusCode::kAborted) << destroyed;
  EXPECT_TRUE(comms[0]->released());
  EXPECT_EQ(streams[0]->Synchronize().code(), absl::StatusCode::kAborted);
  release = true;
  EXPECT_EQ(streams[1]->Synchronize().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(comms[1]->GetAsyncError().code(), absl::StatusCode::kAborted);
}

TEST(Split, GroupsByColorAndOrdersByKey) {
  const int n = 4;
  std::vector<int> new_rank(n, -1), new_size(n, -1);
  std::vector<std::vector<int32_t>> bufs(n);
  ASSERT_OK(FirstError(RunRanks(
      n,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        // Colors: ranks {0, 2} and {1, 3}; keys reverse the order within each.
        ASSIGN_OR_RETURN(std::unique_ptr<Comm> sub, comm.Split(r % 2, -r));
        new_rank[r] = sub->rank();
        new_size[r] = sub->size();
        bufs[r].assign(5, r + 1);
        RETURN_IF_ERROR(sub->AllReduce(bufs[r].data(), bufs[r].data(), 5, DataType::kI32, RedOp::kSum, s));
        RETURN_IF_ERROR(s.Synchronize());
        // A color < 0 joins no communicator.
        ASSIGN_OR_RETURN(std::unique_ptr<Comm> none, comm.Split(r == 0 ? -1 : 0, 0));
        if (r == 0 && none != nullptr) return absl::InternalError("color -1 returned a communicator");
        if (r != 0 && (none == nullptr || none->size() != 3)) return absl::InternalError("bad color-0 split");
        return sub->Destroy();
      },
      Opts("world"))));
  EXPECT_EQ(new_rank, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(new_size, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(bufs[0], std::vector<int32_t>(5, 1 + 3));
  EXPECT_EQ(bufs[1], std::vector<int32_t>(5, 2 + 4));
}

TEST(Stats, CountBuiltInCollectivesAndTheirBytes) {
  ASSERT_OK(FirstError(RunRanks(
      4,
      [&](int r, Comm& comm, Stream& s) -> absl::Status {
        std::vector<float> send(10), recv(40);
        RETURN_IF_ERROR(comm.AllGather(send.data(), recv.data(), 10, DataType::kF32, s));
        RETURN_IF_ERROR(comm.AllReduce(recv.data(), recv.data(), 40, DataType::kF32, RedOp::kSum, s));
        RETURN_IF_ERROR(s.Synchronize());
        Stats st = comm.stats();
        if (st.collective_calls != 2 || st.collective_bytes != 160 + 160 || st.sends != 0) {
          return absl::InternalError("unexpected stats: calls=" + std::to_string(st.collective_calls) +
                                     " bytes=" + std::to_string(st.collective_bytes));
        }
        comm.ResetStats();
        st = comm.stats();
        if (st.collective_calls != 0 || st.collective_bytes != 0) return absl::InternalError("ResetStats");
        return absl::OkStatus();
      },
      Opts("stats"))));
}

// An all-reduce of S and a reduce-scatter of S add the same to collective_bytes; the per-kind counters tell
// them apart.
TEST(Stats, CountByKind) {
  ASSERT_OK(FirstError(RunRanks(
      4,
      [&](int, Comm& comm, Stream& s) -> absl::Status {
        std::vector<float> a(40), b(10);
        RETURN_IF_ERROR(comm.AllReduce(a.data(), a.data(), 40, DataType::kF32, RedOp::kSum, s));
        RETURN_IF_ERROR(comm.ReduceScatter(a.data(), b.data(), 10, DataType::kF32, RedOp::kAvg, s));
        RETURN_IF_ERROR(comm.AllGather(b.data(), a.data(), 10, DataType::kF32, s));
        RETURN_IF_ERROR(comm.AllGather(b.data(), a.data(), 10, DataType::kF32, s));
        RETURN_IF_ERROR(comm.Broadcast(a.data(), a.data(), 3, DataType::kF32, 0, s));
        RETURN_IF_ERROR(s.Synchronize());
        const Stats st = comm.stats();
        const bool ok = st.all_reduce.calls == 1 && st.all_reduce.bytes == 160 &&
                        st.reduce_scatter.calls == 1 && st.reduce_scatter.bytes == 160 &&
                        st.all_gather.calls == 2 && st.all_gather.bytes == 320 && st.broadcast.calls == 1 &&
                        st.broadcast.bytes == 12 && st.reduce.calls == 0 && st.all_to_all.calls == 0 &&
                        st.collective_calls == 5 && st.collective_bytes == 652;
        if (!ok) {
          return absl::InternalError(
              "by kind: AR " + std::to_string(st.all_reduce.calls) + "/" +
              std::to_string(st.all_reduce.bytes) + ", RS " + std::to_string(st.reduce_scatter.calls) + "/" +
              std::to_string(st.reduce_scatter.bytes) + ", AG " + std::to_string(st.all_gather.calls) + "/" +
              std::to_string(st.all_gather.bytes));
        }
        comm.ResetStats();
        if (comm.stats().all_gather.calls != 0) return absl::InternalError("ResetStats keeps the kinds");
        return absl::OkStatus();
      },
      Opts("kinds"))));
}

TEST(Arguments, BadArgumentsAreReturnedByTheCall) {
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(2, Opts("args", milliseconds(200))));
  Stream s;
  Comm& c = *comms[0];
  std::vector<float> buf(16);
  auto code = [](const absl::Status& st) { return st.code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(c.AllReduce(nullptr, buf.data(), 4, DataType::kF32, RedOp::kSum, s)), kInvalid);
  EXPECT_EQ(code(c.AllReduce(buf.data(), nullptr, 4, DataType::kF32, RedOp::kSum, s)), kInvalid);
  EXPECT_EQ(code(c.AllReduce(buf.data(), buf.data(), 4, static_cast<DataType>(42), RedOp::kSum, s)),
            kInvalid);
  EXPECT_EQ(code(c.AllReduce(buf.data(), buf.data(), 4, DataType::kF32, static_cast<RedOp>(9), s)), kInvalid);
  EXPECT_EQ(code(c.AllReduce(buf.data(), buf.data() + 1, 4, DataType::kF32, RedOp::kSum, s)), kInvalid);
  EXPECT_EQ(code(c.Broadcast(buf.data(), buf.data(), 4, DataType::kF32, 2, s)), kInvalid);
  EXPECT_EQ(code(c.Reduce(buf.data(), buf.data(), 4, DataType::kF32, RedOp::kSum, -1, s)), kInvalid);
  EXPECT_EQ(code(c.Send(buf.data(), 4, DataType::kF32, 2, s)), kInvalid);
  EXPECT_EQ(code(c.Recv(buf.data(), 4, DataType::kF32, -1, s)), kInvalid);
  EXPECT_EQ(code(c.AllToAll(buf.data(), buf.data(), 4, DataType::kF32, s)), kInvalid);
  absl::Status root = c.Broadcast(buf.data(), buf.data(), 4, DataType::kF32, 7, s);
  EXPECT_THAT(Msg(root), AllOf(HasSubstr("Broadcast"), HasSubstr("root 7"), HasSubstr("'args'")));
  absl::Status null = c.Send(nullptr, 4, DataType::kF32, 1, s);
  EXPECT_THAT(Msg(null), HasSubstr("null"));
  // Argument errors do not break the communicator, and null buffers are fine with count 0.
  EXPECT_OK(c.GetAsyncError());
  ASSERT_OK(GroupStart());
  EXPECT_OK(comms[0]->AllReduce(nullptr, nullptr, 0, DataType::kF32, RedOp::kSum, s));
  Stream s1;
  EXPECT_OK(comms[1]->AllReduce(nullptr, nullptr, 0, DataType::kF32, RedOp::kSum, s1));
  EXPECT_OK(GroupEnd());
  EXPECT_OK(s.Synchronize());
  EXPECT_OK(s1.Synchronize());
}

// The gloo backend's own behaviour is checked with real processes (multiprocess_test); here only what must
// fail before any Gloo code runs (TSan cannot follow the uninstrumented library).
TEST(Init, OtherBackendsCheckTheirArgumentsOrSayTheyAreNotBuilt) {
  CommOptions gloo;
  gloo.backend = Backend::kGloo;
  EXPECT_EQ(CommInitAll(0, gloo).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(CommInitRank(2, GetUniqueId(), 5, gloo).status()), HasSubstr("rank 5 is out of range"));
  if (!LaunchedByLauncher()) {
    auto env = CommInitFromEnv();
    EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(Msg(env.status()), HasSubstr("labctl launch"));
  }
  CommOptions nccl;
  nccl.backend = Backend::kNccl;
  auto one = CommInitRank(1, GetUniqueId(), 0, nccl);
#ifdef DISTLAB_WITH_NCCL
  // Built with the nccl backend (wherever the CUDA toolkit was found, in every configuration): without a GPU
  // or driver the error names the GPUs needed and found; with one, the rank joins (the GPU tests in
  // nccl_collectives_test check the rest).
  if (!one.ok()) {
    EXPECT_EQ(one.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(Msg(one.status()), HasSubstr("needs 1 GPU"));
    EXPECT_THAT(Msg(one.status()), HasSubstr("found 0"));
  } else {
    EXPECT_OK((*one)->Destroy());
  }
#else
  EXPECT_THAT(Msg(one.status()), HasSubstr("the nccl backend is not built"));
#endif
  EXPECT_EQ(CommInitAll(0).status().code(), absl::StatusCode::kInvalidArgument);
}

// One table names the backends: Name and ParseBackend are inverses, and DISTLAB_BACKEND is read by
// BackendFromEnv alone, gloo when unset or empty.
TEST(Init, BackendNamesRoundTripAndTheEnvironmentDefaultIsGloo) {
  for (Backend b : {Backend::kThreads, Backend::kGloo, Backend::kNccl}) {
    ASSERT_OK_AND_ASSIGN(Backend parsed, ParseBackend(Name(b)));
    EXPECT_EQ(parsed, b);
  }
  EXPECT_EQ(Name(Backend::kGloo), "gloo");
  EXPECT_THAT(Msg(ParseBackend("mpi").status()), HasSubstr("'mpi' is not one of threads, gloo, nccl"));
  const char* saved = std::getenv("DISTLAB_BACKEND");
  const std::string kept = saved != nullptr ? saved : "";
  ::unsetenv("DISTLAB_BACKEND");
  ASSERT_OK_AND_ASSIGN(Backend unset, BackendFromEnv());
  EXPECT_EQ(unset, Backend::kGloo);
  ::setenv("DISTLAB_BACKEND", "threads", 1);
  ASSERT_OK_AND_ASSIGN(Backend threads, BackendFromEnv());
  EXPECT_EQ(threads, Backend::kThreads);
  ::setenv("DISTLAB_BACKEND", "tcp", 1);
  EXPECT_THAT(Msg(BackendFromEnv().status()), HasSubstr("DISTLAB_BACKEND='tcp' is not one of"));
  if (saved != nullptr) {
    ::setenv("DISTLAB_BACKEND", kept.c_str(), 1);
  } else {
    ::unsetenv("DISTLAB_BACKEND");
  }
}

TEST(Init, CommInitRankRendezvousAndItsTimeout) {
  const UniqueId id = GetUniqueId();
  EXPECT_NE(id.value, GetUniqueId().value);
  std::vector<std::vector<double>> bufs(3, std::vector<double>(7, 1.5));
  auto statuses = OnThreads(3, [&](int r) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Comm> comm, CommInitRank(3, id, r, Opts("joined")));
    if (comm->rank() != r || comm->size() != 3) return absl::InternalError("wrong rank or size");
    Stream s;
    RETURN_IF_ERROR(comm->AllReduce(bufs[r].data(), bufs[r].data(), 7, DataType::kF64, RedOp::kSum, s));
    RETURN_IF_ERROR(s.Synchronize());
    return comm->Destroy();
  });
  for (auto& s : statuses) EXPECT_OK(s);
  EXPECT_EQ(bufs[2], std::vector<double>(7, 4.5));

  testing::Activity activity("CommInitRank with a rank that never joins (its timeout must end it)");
  const UniqueId lonely = GetUniqueId();
  statuses = OnThreads(
      2, [&](int r) { return CommInitRank(3, lonely, r, Opts("lonely", milliseconds(200))).status(); });
  for (auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(Msg(s), AllOf(HasSubstr("joined: ranks 0, 1"), HasSubstr("missing: rank 2")));
  }
  const UniqueId odd = GetUniqueId();
  statuses = OnThreads(2, [&](int r) {
    return CommInitRank(r == 0 ? 2 : 3, odd, r, Opts("odd", milliseconds(300))).status();
  });
  EXPECT_TRUE(statuses[0].code() == absl::StatusCode::kInvalidArgument ||
              statuses[1].code() == absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CommInitRank(2, GetUniqueId(), 2, Opts("bad")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Init, ScaledTimeoutAppliesTheEnvironmentScale) {
  EXPECT_EQ(ScaledTimeout(milliseconds(1000)), testing::Scaled(milliseconds(1000)));
}

TEST(Streams, SynchronizeReturnsAndClearsTheFirstError) {
  Stream s;
  EXPECT_TRUE(s.Idle());
  s.Enqueue([] { return absl::OkStatus(); });
  s.Enqueue([] { return absl::InternalError("first"); });
  s.Enqueue([] { return absl::InternalError("second"); });
  absl::Status st = s.Synchronize();
  EXPECT_EQ(Msg(st), "first");
  EXPECT_OK(s.Synchronize());
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    s.Enqueue([&order, i] {
      order.push_back(i);
      return absl::OkStatus();
    });
  }
  EXPECT_OK(s.Synchronize());
  EXPECT_TRUE(s.Idle());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(Streams, EventsTimeTheWorkBetweenThem) {
  Stream s;
  Event start, end, never;
  EXPECT_EQ(never.Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(Event::ElapsedMs(start, end).ok());
  std::atomic<bool> go{false};
  start.Record(s);
  s.Enqueue([&go] {
    while (!go.load()) std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(milliseconds(30));
    return absl::OkStatus();
  });
  end.Record(s);
  EXPECT_FALSE(end.Query());  // the stream cannot pass the blocked work
  EXPECT_FALSE(Event::ElapsedMs(start, end).ok());
  go = true;
  ASSERT_OK(end.Synchronize());
  EXPECT_TRUE(end.Query());
  ASSERT_OK_AND_ASSIGN(double ms, Event::ElapsedMs(start, end));
  EXPECT_GE(ms, 30.0);
  ASSERT_OK_AND_ASSIGN(double back, Event::ElapsedMs(end, start));
  EXPECT_LE(back, -30.0);
}

}  // namespace
}  // namespace distlab::comm
