// Hidden tests of stage C, the harness: the sweep, the checks (#wrong), the timing loop and the rows.
// Correct outputs come from the runtime's built-in collectives; timings are never compared to numbers.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/bandwidth.h"
#include "labs/collectives/harness.h"
#include "reference/base/status.h"
#include "tests/collectives/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using comm::DataType;
using comm::RedOp;

TEST(Harness, SweepSizesGeometric) {
  ASSERT_OK_AND_ASSIGN(auto a, SweepSizes(8, 128, 2));
  EXPECT_EQ(a, (std::vector<size_t>{8, 16, 32, 64, 128}));
  ASSERT_OK_AND_ASSIGN(auto b, SweepSizes(3, 100, 3));
  EXPECT_EQ(b, (std::vector<size_t>{3, 9, 27, 81}));
  ASSERT_OK_AND_ASSIGN(auto c, SweepSizes(1024, 1024, 2));
  EXPECT_EQ(c, (std::vector<size_t>{1024}));
}

// A non-integer factor: floor of the running product (harness.h), repeated sizes skipped.
TEST(Harness, SweepSizesNonIntegerFactor) {
  ASSERT_OK_AND_ASSIGN(auto a, SweepSizes(8, 100, 1.5));
  EXPECT_EQ(a, (std::vector<size_t>{8, 12, 18, 27, 40, 60, 91}));
  ASSERT_OK_AND_ASSIGN(auto b, SweepSizes(1, 4, 1.2));
  EXPECT_EQ(b, (std::vector<size_t>{1, 2, 3}));
  ASSERT_OK_AND_ASSIGN(auto c, SweepSizes(1000, 5000, 1.7));  // 1000, 1700, 2890, 4913
  EXPECT_EQ(c, (std::vector<size_t>{1000, 1700, 2890, 4913}));
}

TEST(Harness, SweepSizesRejectsBadFlags) {
  EXPECT_EQ(SweepSizes(0, 64, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SweepSizes(128, 64, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SweepSizes(8, 64, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

PerfOptions Opts(Collective c, int n, DataType t = DataType::kF32, RedOp op = RedOp::kSum) {
  PerfOptions o;
  o.collective = c;
  o.ranks = n;
  o.dtype = t;
  o.op = op;
  o.iters = 2;
  o.warmup_iters = 1;
  o.root = n - 1;
  o.comm = testutil::Options();
  return o;
}

// Elements of the send and receive buffers (comm.h's rules) for the built-in reference below.
void Sizes(Collective c, size_t count, int n, size_t* send, size_t* recv) {
  *send = *recv = count;
  if (c == Collective::kReduceScatter) *send = n * count;
  if (c == Collective::kAllGather) *recv = n * count;
  if (c == Collective::kAllToAll) *send = *recv = n * count;
}

absl::Status Builtin(const PerfOptions& o, const void* s, void* r, size_t count, comm::Comm& comm,
                     comm::Stream& st) {
  switch (o.collective) {
    case Collective::kAllReduce:
      return comm.AllReduce(s, r, count, o.dtype, o.op, st);
    case Collective::kReduceScatter:
      return comm.ReduceScatter(s, r, count, o.dtype, o.op, st);
    case Collective::kAllGather:
      return comm.AllGather(s, r, count, o.dtype, st);
    case Collective::kBroadcast:
      return comm.Broadcast(s, r, count, o.dtype, o.root, st);
    case Collective::kReduce:
      return comm.Reduce(s, r, count, o.dtype, o.op, o.root, st);
    case Collective::kAllToAll:
      return comm.AllToAll(s, r, count, o.dtype, st);
    default:
      return absl::InvalidArgumentError("not in this test");
  }
}

// For each collective: the built-in's true output on FillCheckInput's data has 0 wrong elements, and
// corrupting 3 of them (on rank 1) gives 3.
void ExpectCountWrongFindsCorruption(const PerfOptions& o, size_t count) {
  std::vector<int64_t> clean(o.ranks, -7), dirty(o.ranks, -7);
  auto statuses = comm::RunRanks(
      o.ranks,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        size_t ns, nr;
        Sizes(o.collective, count, o.ranks, &ns, &nr);
        const size_t es = comm::SizeOf(o.dtype);
        std::vector<char> send(ns * es), recv(nr * es, 0);
        FillCheckInput(o, r, count, send.data());
        RETURN_IF_ERROR(Builtin(o, send.data(), recv.data(), count, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        clean[r] = CountWrong(o, r, count, recv.data());
        if (r == o.root || o.collective != Collective::kReduce) {
          for (size_t j : {size_t{0}, nr / 2, nr - 1}) {
            comm::SetElementFromDouble(recv.data(), j, o.dtype,
                                       comm::ElementAsDouble(recv.data(), j, o.dtype) + 3);
          }
        }
        dirty[r] = CountWrong(o, r, count, recv.data());
        return absl::OkStatus();
      },
      o.comm);
  ASSERT_OK(comm::FirstError(statuses));
  for (int r = 0; r < o.ranks; ++r) {
    EXPECT_EQ(clean[r], 0) << CollectiveName(o.collective) << " " << comm::Name(o.dtype) << " rank " << r;
    const bool has_output = o.collective != Collective::kReduce || r == o.root;
    EXPECT_EQ(dirty[r], has_output ? 3 : 0) << CollectiveName(o.collective) << " rank " << r;
  }
}

TEST(Harness, CountWrongForEveryCollective) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll}) {
    ExpectCountWrongFindsCorruption(Opts(c, 4), 50);
    if (HasFailure()) return;
  }
}

TEST(Harness, CountWrongForEveryDtypeAndOp) {
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    for (RedOp op : comm::kAllRedOps) {
      Collective c = (k % 2) ? Collective::kReduceScatter : Collective::kAllReduce;
      ExpectCountWrongFindsCorruption(Opts(c, 2 + k % 7, t, op), 23 + k);
      if (HasFailure()) return;
      ++k;
    }
  }
}

// The timing loop makes exactly warmup + iters calls, and returns a positive time per call.
TEST(Harness, TimeCollectiveRunsWarmupPlusIters) {
  PerfOptions o = Opts(Collective::kAllReduce, 3);
  o.warmup_iters = 3;
  o.iters = 5;
  std::vector<uint64_t> calls(3);
  std::vector<double> secs(3);
  auto statuses = comm::RunRanks(
      3,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<float> send(1000, 1), recv(1000);
        comm.ResetStats();
        ASSIGN_OR_RETURN(secs[r], TimeCollective(o, 1000, send.data(), recv.data(), comm, stream));
        calls[r] = comm.stats().collective_calls;
        if (!stream.Idle()) return absl::InternalError("returned before the stream was done");
        return absl::OkStatus();
      },
      o.comm);
  ASSERT_OK(comm::FirstError(statuses));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(calls[r], 8u) << "rank " << r;
    EXPECT_GT(secs[r], 0) << "rank " << r;
  }
}

TEST(Harness, TimeCollectiveRejectsZeroIters) {
  PerfOptions o = Opts(Collective::kAllReduce, 1);
  o.iters = 0;
  auto statuses = comm::RunRanks(1, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    float x = 0;
    auto t = TimeCollective(o, 1, &x, &x, comm, stream);
    return t.status().code() == absl::StatusCode::kInvalidArgument
               ? absl::OkStatus()
               : absl::InternalError("iters 0 gave " + t.status().ToString());
  });
  EXPECT_OK(comm::FirstError(statuses));
}

// The ring algorithm goes through Send/Recv only; the built-in makes one collective call; combinations
// without an implementation are errors.
TEST(Harness, LaunchCollectiveDispatches) {
  auto statuses = comm::RunRanks(
      2,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        PerfOptions o = Opts(Collective::kAllReduce, 2);
        std::vector<float> x(10, static_cast<float>(r + 1)), y(10, 0);
        o.algorithm = Algorithm::kRing;
        comm.ResetStats();
        RETURN_IF_ERROR(LaunchCollective(o, x.data(), y.data(), 10, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 0 || comm.stats().sends == 0) {
          return absl::InternalError("ring all-reduce did not go through Send/Recv");
        }
        if (y[9] != 3.0f) return absl::InternalError("ring all-reduce result " + std::to_string(y[9]));
        o.algorithm = Algorithm::kBuiltin;
        RETURN_IF_ERROR(LaunchCollective(o, x.data(), y.data(), 10, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 1) return absl::InternalError("built-in was not called once");
        o.algorithm = Algorithm::kRing;
        o.collective = Collective::kReduce;
        if (LaunchCollective(o, x.data(), y.data(), 10, comm, stream).code() !=
            absl::StatusCode::kInvalidArgument) {
          return absl::InternalError("ring reduce should be INVALID_ARGUMENT");
        }
        return absl::OkStatus();
      },
      testutil::Options());
  EXPECT_OK(comm::FirstError(statuses));
}

// A row: S and count as nccl-tests (v2.13.12 and later) reports them (per-rank blocks rounded down to 16
// bytes, bandwidth.h), nothing wrong, busbw = algbw * factor, algbw = S / t.
void ExpectGoodRow(const PerfOptions& o, size_t bytes, size_t want_bytes, size_t want_count) {
  ASSERT_OK_AND_ASSIGN(PerfRow row, MeasureSize(o, bytes));
  const std::string what =
      std::string(CollectiveName(o.collective)) + "/" + std::string(AlgorithmName(o.algorithm));
  EXPECT_EQ(row.bytes, want_bytes) << what;
  EXPECT_EQ(row.count, want_count) << what;
  const bool in_place = o.collective != Collective::kAllToAll;
  EXPECT_EQ(row.in_place.measured, in_place) << what;
  for (const PerfPoint* p : {&row.out_of_place, &row.in_place}) {
    if (!p->measured) continue;
    EXPECT_EQ(p->wrong, o.check ? 0 : -1) << what;
    EXPECT_GT(p->time_us, 0) << what;
    EXPECT_NEAR(p->algbw, row.bytes / (p->time_us * 1e-6) / 1e9, 1e-9 * p->algbw) << what;
    EXPECT_NEAR(p->busbw, p->algbw * BusBwFactor(o.collective, o.ranks), 1e-9 * p->algbw) << what;
  }
}

TEST(Harness, MeasureSizeBuiltinRows) {
  ExpectGoodRow(Opts(Collective::kAllReduce, 4), 65536, 65536, 16384);
  ExpectGoodRow(Opts(Collective::kReduceScatter, 4), 65536, 65536, 4096);
  ExpectGoodRow(Opts(Collective::kAllGather, 3), 1000, 960, 80);  // 83 f32 per rank -> 80
  ExpectGoodRow(Opts(Collective::kBroadcast, 3), 4000, 4000, 1000);
  ExpectGoodRow(Opts(Collective::kReduce, 2, DataType::kI32, RedOp::kMax), 4096, 4096, 1024);
  ExpectGoodRow(Opts(Collective::kAllToAll, 4, DataType::kBF16), 4096, 4096, 512);
}

TEST(Harness, MeasureSizeRingRows) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kAllToAll}) {
    PerfOptions o = Opts(c, 4, DataType::kF16, RedOp::kAvg);
    o.algorithm = Algorithm::kRing;
    size_t count = CollectiveCount(c, 24000, 2, 4);
    ExpectGoodRow(o, 24000, static_cast<size_t>(CollectiveBytes(c, count, 2, 4)), count);
  }
}

TEST(Harness, UncheckedRowsReportMinusOne) {
  PerfOptions o = Opts(Collective::kAllReduce, 2);
  o.check = false;
  ExpectGoodRow(o, 1024, 1024, 256);
}

TEST(Harness, RunPerfOneRowPerSize) {
  PerfOptions o = Opts(Collective::kAllGather, 2, DataType::kU8);
  o.min_bytes = 64;
  o.max_bytes = 1024;
  o.step_factor = 4;
  ASSERT_OK_AND_ASSIGN(std::vector<PerfRow> rows, RunPerf(o));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].bytes, 64u);
  EXPECT_EQ(rows[2].bytes, 1024u);
  EXPECT_EQ(rows[2].count, 512u);
  for (const PerfRow& r : rows) EXPECT_EQ(r.out_of_place.wrong, 0);
  o.min_bytes = 0;
  EXPECT_FALSE(RunPerf(o).ok());
}

}  // namespace
}  // namespace distlab::collectives
