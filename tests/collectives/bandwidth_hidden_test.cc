// Hidden tests of stage C, the arithmetic: S per collective, algbw, nccl-tests' busbw factors, the
// shared-memory bound and the alpha-beta model. Expected values are written out here.
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "labs/collectives/bandwidth.h"

namespace distlab::collectives {
namespace {

TEST(BandwidthMath, BytesOfEachCollective) {
  // count = 1000 elements of 4 bytes on n = 8 ranks.
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kAllReduce, 1000, 4, 8), 4000);
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kBroadcast, 1000, 4, 8), 4000);
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kReduce, 1000, 4, 8), 4000);
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kSendRecv, 1000, 4, 8), 4000);
  // The per-rank collectives: S is the whole array.
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kReduceScatter, 1000, 4, 8), 32000);
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kAllGather, 1000, 4, 8), 32000);
  EXPECT_DOUBLE_EQ(CollectiveBytes(Collective::kAllToAll, 1000, 4, 8), 32000);
}

// nccl-tests (v2.13.12 and later): whole elements, and for the per-rank collectives a per-rank count
// rounded down to a multiple of 16 bytes.
TEST(BandwidthMath, CountsRoundDown) {
  EXPECT_EQ(CollectiveCount(Collective::kAllReduce, 4001, 4, 8), 1000u);
  EXPECT_EQ(CollectiveCount(Collective::kAllReduce, 4001, 8, 8), 500u);  // no per-rank rounding
  EXPECT_EQ(CollectiveCount(Collective::kReduceScatter, 32000, 4, 8), 1000u);
  EXPECT_EQ(CollectiveCount(Collective::kReduceScatter, 32031, 4, 8), 1000u);
  EXPECT_EQ(CollectiveCount(Collective::kAllGather, 31999, 4, 8), 996u);    // 999 -> a multiple of 4 f32
  EXPECT_EQ(CollectiveCount(Collective::kAllToAll, 24, 2, 3), 0u);          // 4 bf16 = 8 B < 16 B
  EXPECT_EQ(CollectiveCount(Collective::kAllToAll, 1000, 2, 3), 160u);      // 166 -> a multiple of 8 bf16
  EXPECT_EQ(CollectiveCount(Collective::kAllGather, 1000, 1, 3), 320u);     // u8: 333 -> a multiple of 16
  EXPECT_EQ(CollectiveCount(Collective::kReduceScatter, 1000, 8, 3), 40u);  // f64: 41 -> a multiple of 2
  EXPECT_EQ(CollectiveCount(Collective::kBroadcast, 7, 8, 2), 0u);
}

TEST(BandwidthMath, AlgBwIsBytesOverTime) {
  EXPECT_DOUBLE_EQ(AlgBw(1e9, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(AlgBw(3e6, 1e-3), 3.0);
  EXPECT_DOUBLE_EQ(AlgBw(1 << 20, 0), 0.0);
}

TEST(BandwidthMath, BusBwFactors) {
  for (int n : {1, 2, 3, 4, 8, 64}) {
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, n), 2.0 * (n - 1) / n) << n;
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kReduceScatter, n), (n - 1.0) / n) << n;
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllGather, n), (n - 1.0) / n) << n;
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllToAll, n), (n - 1.0) / n) << n;
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kBroadcast, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kReduce, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kSendRecv, n), 1.0) << n;
  }
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 8), 1.75);
}

TEST(BandwidthMath, BusBwIsAlgBwTimesFactor) {
  EXPECT_DOUBLE_EQ(BusBw(Collective::kAllReduce, 8, 8e9, 2.0), 7.0);
  EXPECT_DOUBLE_EQ(BusBw(Collective::kAllGather, 4, 4e9, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(BusBw(Collective::kBroadcast, 4, 4e9, 1.0), 4.0);
}

// R reads and W writes of S against a copy's 1 + 1: algbw <= 2B / (R + W).
TEST(BandwidthMath, SharedMemoryBound) {
  const double B = 48.0;
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kAllReduce, 4, B), 12.0);  // B / n
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kAllReduce, 8, B), 6.0);
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kReduceScatter, 5, B), 16.0);  // 2B / (n + 1)
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kAllGather, 5, B), 16.0);
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kReduce, 3, B), 24.0);
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kBroadcast, 4, B), 24.0);  // 2B / n
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kAllToAll, 4, B), 12.0);   // B / n
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kSendRecv, 4, B), 12.0);   // n sends of S: B / n
  EXPECT_DOUBLE_EQ(AlgBwBound(Collective::kSendRecv, 2, B), 24.0);
}

TEST(AlphaBeta, RingTime) {
  AlphaBeta ab{1e-5, 1e-10};
  EXPECT_DOUBLE_EQ(RingAllReduceTime(ab, 4, 1e8), 6 * 1e-5 + 1.5 * 1e8 * 1e-10);
  EXPECT_DOUBLE_EQ(RingAllReduceTime(ab, 1, 1e8), 0.0);
}

TEST(AlphaBeta, TreeTime) {
  AlphaBeta ab{1e-5, 1e-10};
  EXPECT_DOUBLE_EQ(TreeAllReduceTime(ab, 8, 1e6), 6 * (1e-5 + 1e6 * 1e-10));
  EXPECT_DOUBLE_EQ(TreeAllReduceTime(ab, 5, 1e6), 6 * (1e-5 + 1e6 * 1e-10));  // ceil(log2 5) = 3 levels
  EXPECT_DOUBLE_EQ(TreeAllReduceTime(ab, 2, 1e6), 2 * (1e-5 + 1e6 * 1e-10));
}

TEST(AlphaBeta, CrossoverEqualizesTheCosts) {
  AlphaBeta ab{2e-6, 5e-11};
  for (int n : {4, 8, 16, 64}) {
    double s = RingTreeCrossoverBytes(ab, n);
    ASSERT_GT(s, 0) << n;
    EXPECT_NEAR(RingAllReduceTime(ab, n, s), TreeAllReduceTime(ab, n, s), 1e-9 * TreeAllReduceTime(ab, n, s))
        << n;
    EXPECT_LT(TreeAllReduceTime(ab, n, 0.5 * s), RingAllReduceTime(ab, n, 0.5 * s)) << n;
    EXPECT_GT(TreeAllReduceTime(ab, n, 2 * s), RingAllReduceTime(ab, n, 2 * s)) << n;
  }
  // n = 8: L = 3, S* = (7 - 3) a / ((3 - 7/8) b).
  EXPECT_NEAR(RingTreeCrossoverBytes(ab, 8), 4 * 2e-6 / (2.125 * 5e-11), 1e-6);
}

TEST(AlphaBeta, NoCrossoverWhenTheRingNeverLoses) {
  AlphaBeta ab{2e-6, 5e-11};
  EXPECT_EQ(RingTreeCrossoverBytes(ab, 2), 0.0);
  EXPECT_EQ(RingTreeCrossoverBytes(ab, 3), 0.0);
}

}  // namespace
}  // namespace distlab::collectives
