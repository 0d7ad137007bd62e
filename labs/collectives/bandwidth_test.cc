// Public tests of stage C (bandwidth.h, harness.h). The hidden tests cover every collective and n.
#include "labs/collectives/bandwidth.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/harness.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

// 1 GB in 0.5 s is 2 GB/s; an all-reduce on 4 ranks carries 2 * 3/4 of that on each link: 3 GB/s. A time
// that is not positive gives 0 (bandwidth.h).
TEST(BandwidthMath, AllReduceOnFourRanks) {
  EXPECT_DOUBLE_EQ(AlgBw(1e9, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(AlgBw(1e9, 0), 0.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBw(Collective::kAllReduce, 4, 1e9, 0.5), 3.0);
}

// An all-gather with count 1000 floats per rank on 8 ranks moves S = 8 * 1000 * 4 bytes.
TEST(BandwidthMath, AllGatherBytesCountTheWholeArray) {
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kAllGather, 1000, 4, 8), 32000.0);
  EXPECT_EQ(CollectiveCount(Collective::kAllGather, 32000, 4, 8), 1000u);
}

// Reduce-scatter is the mirror image: count 1000 floats per rank on 8 ranks reduce an array of S = 32000 B.
TEST(BandwidthMath, ReduceScatterBytesCountTheWholeArray) {
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kReduceScatter, 1000, 4, 8), 32000.0);
}

// The per-rank count of all-gather, reduce-scatter and all-to-all ends on a multiple of 16 bytes, as in
// nccl-tests: 1000 B of f32 on 3 ranks is 83 elements per rank, rounded down to 80 (S = 960 B); 4096 B of
// bf16 on 4 ranks is 512 per block, already a multiple of 8. All-reduce keeps every whole element.
TEST(BandwidthMath, CountsRoundDownTo16BytesPerRank) {
  EXPECT_EQ(CollectiveCount(Collective::kAllGather, 1000, 4, 3), 80u);
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kAllGather, 80, 4, 3), 960.0);
  EXPECT_EQ(CollectiveCount(Collective::kAllToAll, 4096, 2, 4), 512u);
  EXPECT_EQ(CollectiveCount(Collective::kAllToAll, 1000, 2, 3), 160u);
  EXPECT_EQ(CollectiveCount(Collective::kAllReduce, 1002, 4, 3), 250u);
}

// All-reduce reads n*S and writes n*S; a copy reads S and writes S: algbw <= B / n.
TEST(BandwidthMath, AllReduceBoundIsCopyBandwidthOverN) {
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kAllReduce, 4, 40.0), 10.0);
}

// Broadcast on 4 ranks, B = 60 GB/s. The root's input is read once; the outputs of the 3 other ranks are
// written; the root is in place, so its output is not written:
//   read  S,  write 3 S  ->  4 S of traffic; a copy moves S read + S written in S / B, so this takes
//   4 S / (2 B) = 2 S / B  ->  algbw <= S / (2 S / B) = B / 2 = 30 GB/s
TEST(BandwidthMath, BroadcastBoundCountsTheRootInPlace) {
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kBroadcast, 4, 60.0), 30.0);
}

// Reduce-scatter on 3 ranks, B = 40 GB/s. Every rank's input is the whole array S; every output is S/3:
//   read  3 S  (each input once),  write 3 * S/3 = S  (each output once)  ->  4 S of traffic
//   -> t >= 4 S / (2 B)  ->  algbw <= B / 2 = 20 GB/s
TEST(BandwidthMath, ReduceScatterBoundOnThreeRanks) {
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kReduceScatter, 3, 40.0), 20.0);
}

// sendrecv: each of the n ranks sends its S to the next, so n*S are read and n*S written: B / n, as for
// all-reduce (not B: one pair alone would be one copy, but every rank sends at once).
TEST(BandwidthMath, SendRecvBoundIsNCopies) {
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kSendRecv, 4, 40.0), 10.0);
}

// The alpha-beta model with alpha = 5 us, beta = 1 ns per byte (1 GB/s), S = 4 MB. Steps run one after
// the other; each costs alpha + (bytes of its message) * beta:
//
//   n  algorithm  steps                                   message       time
//   4  ring       2(n-1) = 6 (3 RS, then 3 AG)            S/4 = 1 MB    6 * 1.005 ms =  6.03 ms
//   4  tree       L = ceil(log2 4) = 2 up, 2 down: 4      S   = 4 MB    4 * 4.005 ms = 16.02 ms
//   5  ring       2(n-1) = 8                              S/5 = 0.8 MB  8 * 0.805 ms =  6.44 ms
//   5  tree       L = ceil(log2 5) = 3 up, 3 down: 6      S   = 4 MB    6 * 4.005 ms = 24.03 ms
//   1  either     no steps                                              0
TEST(AlphaBeta, RingAndTreeOnFourAndFiveRanks) {
  const AlphaBeta ab{5e-6, 1e-9};
  const double S = 4e6;
  EXPECT_NEAR(RingAllReduceTime(ab, 4, S), 6.03e-3, 1e-12);
  EXPECT_NEAR(TreeAllReduceTime(ab, 4, S), 16.02e-3, 1e-12);
  EXPECT_NEAR(RingAllReduceTime(ab, 5, S), 6.44e-3, 1e-12);
  EXPECT_NEAR(TreeAllReduceTime(ab, 5, S), 24.03e-3, 1e-12);
  EXPECT_EQ(RingAllReduceTime(ab, 1, S), 0.0);
  EXPECT_EQ(TreeAllReduceTime(ab, 1, S), 0.0);
}

// T_ring(S*) == T_tree(S*) at the crossover; the tree wins below it.
TEST(AlphaBeta, CrossoverOnEightRanks) {
  AlphaBeta ab{5e-6, 1e-9};
  double s = RingTreeCrossoverBytes(ab, 8);
  ASSERT_GT(s, 0);
  EXPECT_NEAR(RingAllReduceTime(ab, 8, s), TreeAllReduceTime(ab, 8, s), 1e-12);
  EXPECT_LT(TreeAllReduceTime(ab, 8, s / 2), RingAllReduceTime(ab, 8, s / 2));
}

TEST(Harness, SweepSizesDoubles) {
  ASSERT_OK_AND_ASSIGN(std::vector<size_t> sizes, SweepSizes(8, 64, 2));
  EXPECT_EQ(sizes, (std::vector<size_t>{8, 16, 32, 64}));
}

// -f 1.5: the running product 8, 12, 18, 27, 40.5, 60.75, 91.125 (136.7 > 100 stops), each truncated.
TEST(Harness, SweepSizesNonIntegerFactor) {
  ASSERT_OK_AND_ASSIGN(std::vector<size_t> sizes, SweepSizes(8, 100, 1.5));
  EXPECT_EQ(sizes, (std::vector<size_t>{8, 12, 18, 27, 40, 60, 91}));
}

// CountWrong for a reduce-scatter on 2 ranks, count 3 per rank, f32 sum. The check pattern is
// CheckValue(sum, rank, i) = (7 rank + 3 i) mod 11 over the whole array of n * count = 6 elements:
//
//   element i            0   1   2 |  3   4   5
//   rank 0 input         0   3   6 |  9   1   4
//   rank 1 input         7  10   2 |  5   8   0
//   sum                  7  13   8 | 14   9   4
//                        rank 0's output  | rank 1's output
TEST(Harness, CountWrongOnReduceScatterDrawn) {
  PerfOptions o;
  o.collective = Collective::kReduceScatter;
  o.ranks = 2;
  o.dtype = comm::DataType::kF32;
  o.op = comm::RedOp::kSum;
  const std::vector<float> rank0{7, 13, 8}, rank1{14, 9, 4}, rank1_one_off{14, 9, 5};
  EXPECT_EQ(CountWrong(o, 0, 3, rank0.data()), 0);
  EXPECT_EQ(CountWrong(o, 1, 3, rank1.data()), 0);
  EXPECT_EQ(CountWrong(o, 1, 3, rank1_one_off.data()), 1);
  EXPECT_EQ(CountWrong(o, 1, 3, rank0.data()), 3);  // rank 0's share is wrong on rank 1
  std::vector<float> send(6);
  FillCheckInput(o, 1, 3, send.data());
  EXPECT_EQ(send, (std::vector<float>{7, 10, 2, 5, 8, 0}));
}

// The timing loop of one rank, as a list of events (2 ranks, built-in all-reduce, -w 2 -n 3):
//   warm-up call, warm-up call, synchronize | Event start | call, call, call | Event end, synchronize
// so the communicator counts 5 collective calls, and the time returned is the end-start gap / 3.
TEST(Harness, TimeCollectiveCountsItsCalls) {
  PerfOptions o;
  o.ranks = 2;
  o.warmup_iters = 2;
  o.iters = 3;
  std::vector<uint64_t> calls(2);
  std::vector<double> seconds(2);
  ASSERT_OK(comm::FirstError(comm::RunRanks(2, [&](int r, comm::Comm& comm, comm::Stream& stream) {
    std::vector<float> send(16, 1.0f), recv(16);
    comm.ResetStats();
    absl::StatusOr<double> t = TimeCollective(o, 16, send.data(), recv.data(), comm, stream);
    if (!t.ok()) return t.status();
    calls[r] = comm.stats().collective_calls;
    seconds[r] = *t;
    return absl::OkStatus();
  })));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(calls[r], 5u) << "rank " << r << ": want 2 warm-up calls + 3 timed calls";
    EXPECT_GT(seconds[r], 0) << "rank " << r;
  }
  o.iters = 0;
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1));
  comm::Stream stream;
  float x = 0;
  absl::StatusOr<double> bad = TimeCollective(o, 1, &x, &x, *comms[0], stream);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("-n"), absl::string_view::npos) << bad.status();
  (void)comms[0]->Destroy();
}

// One checked row of the built-in all-reduce: nothing wrong, and busbw = algbw * 2(n-1)/n.
TEST(Harness, MeasureSizeBuiltinAllReduce) {
  PerfOptions o;
  o.ranks = 2;
  o.iters = 2;
  o.warmup_iters = 1;
  ASSERT_OK_AND_ASSIGN(PerfRow row, MeasureSize(o, 4096));
  EXPECT_EQ(row.bytes, 4096u);
  EXPECT_EQ(row.count, 1024u);
  EXPECT_EQ(row.out_of_place.wrong, 0);
  EXPECT_EQ(row.in_place.wrong, 0);
  EXPECT_GT(row.out_of_place.time_us, 0);
  EXPECT_NEAR(row.out_of_place.busbw, row.out_of_place.algbw * 1.0, 1e-9 * row.out_of_place.algbw);
}

// RunPerf for -b 8 -e 32 -f 2: one row per size, 8, 16 and 32 bytes (2, 4 and 8 f32). A combination with
// no implementation (reduce with the ring algorithm) fails at the first size, and the error says which:
//   INVALID_ARGUMENT "size 8 bytes: <LaunchCollective's message>"
TEST(Harness, RunPerfOneRowPerSizeAndErrorsNameTheSize) {
  PerfOptions o;
  o.ranks = 2;
  o.min_bytes = 8;
  o.max_bytes = 32;
  o.iters = 1;
  o.warmup_iters = 1;
  ASSERT_OK_AND_ASSIGN(std::vector<PerfRow> rows, RunPerf(o));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].bytes, 8u);
  EXPECT_EQ(rows[1].bytes, 16u);
  EXPECT_EQ(rows[2].bytes, 32u);
  EXPECT_EQ(rows[2].count, 8u);
  for (const PerfRow& row : rows) EXPECT_EQ(row.out_of_place.wrong, 0) << row.bytes << " bytes";
  o.collective = Collective::kReduce;
  o.algorithm = Algorithm::kRing;
  absl::StatusOr<std::vector<PerfRow>> bad = RunPerf(o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_EQ(bad.status().message().rfind("size 8 bytes: ", 0), 0u) << bad.status();
}

}  // namespace
}  // namespace distlab::collectives
