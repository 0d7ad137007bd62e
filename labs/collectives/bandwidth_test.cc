// Public tests of stage C (bandwidth.h, harness.h). The hidden tests cover every collective and n.
#include "labs/collectives/bandwidth.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/harness.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

// 1 GB in 0.5 s is 2 GB/s; an all-reduce on 4 ranks carries 2 * 3/4 of that on each link: 3 GB/s.
TEST(BandwidthMath, AllReduceOnFourRanks) {
  EXPECT_DOUBLE_EQ(AlgBw(1e9, 0.5), 2.0);
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

// sendrecv: each of the n ranks sends its S to the next, so n*S are read and n*S written: B / n, as for
// all-reduce (not B: one pair alone would be one copy, but every rank sends at once).
TEST(BandwidthMath, SendRecvBoundIsNCopies) {
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kSendRecv, 4, 40.0), 10.0);
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

}  // namespace
}  // namespace distlab::collectives
