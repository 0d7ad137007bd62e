// Public tests of stage B (ring.h): small cases with values you can check by hand. The hidden tests
// compare every dtype and op with the built-in collectives and check the byte counters.
#include "labs/collectives/ring.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using comm::DataType;
using comm::RedOp;

comm::CommOptions Options() {
  comm::CommOptions o;
  o.timeout = std::chrono::milliseconds(3000);  // a deadlocked ring fails in seconds, naming the ranks
  return o;
}

// 4 ranks, count 10 (not divisible by 4): chunk j = [10j/4, 10(j+1)/4) = [0,2) [2,5) [5,7) [7,10).
// Rank r holds x_r[i] = 100 r + i; every rank must end with sum_r x_r[i] = 600 + 4 i.
//
//   reduce-scatter step 0:  r0 --c3--> r1 --c0--> r2 --c1--> r3 --c2--> r0   (each sends chunk r-1)
//   after 3 steps rank r holds chunk r summed; the all-gather then circulates the finished chunks.
TEST(RingAllReduce, SumsTenFloatsOnFourRanks) {
  std::vector<std::vector<float>> out(4);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      4,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<float> x(10);
        for (int i = 0; i < 10; ++i) x[i] = 100.0f * r + i;
        out[r].assign(10, -1);
        absl::Status s =
            RingAllReduce(x.data(), out[r].data(), 10, DataType::kF32, RedOp::kSum, comm, stream);
        if (!s.ok()) return s;
        s = stream.Synchronize();
        if (comm.stats().collective_calls != 0)
          return absl::InternalError("a built-in collective was called");
        return s;
      },
      Options())));
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 10; ++i) EXPECT_EQ(out[r][i], 600.0f + 4 * i) << "rank " << r << " element " << i;
  }
}

// Bytes with a count that n does not divide: count 6 (f32, S = 24 bytes) on 8 ranks. Each rank must send
// within one element of 2(n-1)/n * S = 42 bytes, so 40 or 44; all ranks together exactly 2(n-1) * S = 336.
// One chunk layout that does it: sizes 0 1 1 1 0 1 1 1 (chunks 0..7; the two empty ones as far apart as
// they can be). The elements each rank sends at each step, "." where its chunk is empty (no message):
//
//                   rank  0  1  2  3  4  5  6  7
//   reduce-scatter step 0  1  .  1  1  1  .  1  1
//                  step 1  1  1  .  1  1  1  .  1
//                  step 2  1  1  1  .  1  1  1  .
//                  step 3  .  1  1  1  .  1  1  1
//                  step 4  1  .  1  1  1  .  1  1
//                  step 5  1  1  .  1  1  1  .  1
//                  step 6  1  1  1  .  1  1  1  .
//   all-gather     step 0  .  1  1  1  .  1  1  1
//                  step 1  1  .  1  1  1  .  1  1
//                  step 2  1  1  .  1  1  1  .  1
//                  step 3  1  1  1  .  1  1  1  .
//                  step 4  .  1  1  1  .  1  1  1
//                  step 5  1  .  1  1  1  .  1  1
//                  step 6  1  1  .  1  1  1  .  1
//   elements sent         11 10 10 11 11 10 10 11   = 44 40 40 44 44 40 40 44 bytes, 336 in all
//
// Another layout that keeps the rule gives other per-rank numbers, so the test checks the rule itself. The
// layout 1 1 1 1 1 1 0 0 (the remainder on the first chunks) breaks it: one rank sends 12 elements, 48 bytes.
TEST(RingAllReduce, BytesPerRankCountSixOnEightRanks) {
  const int n = 8;
  const size_t count = 6;
  std::vector<comm::Stats> stats(n);
  std::vector<std::vector<float>> out(n);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<float> x(count);
        for (size_t i = 0; i < count; ++i) x[i] = 10.0f * r + i;
        out[r].assign(count, -1);
        comm.ResetStats();
        absl::Status s =
            RingAllReduce(x.data(), out[r].data(), count, DataType::kF32, RedOp::kSum, comm, stream);
        if (!s.ok()) return s;
        s = stream.Synchronize();
        stats[r] = comm.stats();
        return s;
      },
      Options())));
  uint64_t total = 0, received = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(stats[r].collective_calls, 0u) << "rank " << r << " called a built-in collective";
    EXPECT_TRUE(stats[r].bytes_sent == 40 || stats[r].bytes_sent == 44)
        << "rank " << r << " sent " << stats[r].bytes_sent
        << " bytes; want within one element (4 bytes) of 42";
    total += stats[r].bytes_sent;
    received += stats[r].bytes_received;
    // sum over ranks of 10 r + i = 280 + 8 i
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ(out[r][i], 280.0f + 8 * i) << "rank " << r << " element " << i;
  }
  EXPECT_EQ(total, 336u) << "all ranks together must send 2(n-1) * S";
  EXPECT_EQ(received, total);
}

// 3 ranks, count 2 per rank: rank r contributes send[j] = 10 r + j for j < 6; rank r receives the sum of
// elements 2r and 2r+1:  rank 0 -> {30, 33}, rank 1 -> {36, 39}, rank 2 -> {42, 45}.
TEST(RingReduceScatter, ThreeRanksOutOfPlace) {
  std::vector<std::vector<int32_t>> out(3);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      3,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<int32_t> x(6);
        for (int j = 0; j < 6; ++j) x[j] = 10 * r + j;
        out[r].assign(2, -1);
        absl::Status s =
            RingReduceScatter(x.data(), out[r].data(), 2, DataType::kI32, RedOp::kSum, comm, stream);
        return s.ok() ? stream.Synchronize() : s;
      },
      Options())));
  EXPECT_EQ(out[0], (std::vector<int32_t>{30, 33}));
  EXPECT_EQ(out[1], (std::vector<int32_t>{36, 39}));
  EXPECT_EQ(out[2], (std::vector<int32_t>{42, 45}));
}

// 3 ranks each contribute {r, r}: everyone ends with {0, 0, 1, 1, 2, 2}.
TEST(RingAllGather, ThreeRanksOutOfPlace) {
  std::vector<std::vector<int32_t>> out(3);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      3,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<int32_t> x{r, r};
        out[r].assign(6, -1);
        absl::Status s = RingAllGather(x.data(), out[r].data(), 2, DataType::kI32, comm, stream);
        return s.ok() ? stream.Synchronize() : s;
      },
      Options())));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], (std::vector<int32_t>{0, 0, 1, 1, 2, 2})) << "rank " << r;
}

// Root 2 of 4 broadcasts 5 doubles; the chain is 2 -> 3 -> 0 -> 1.
TEST(RingBroadcast, RootTwoOfFour) {
  std::vector<std::vector<double>> out(4);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      4,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<double> x{1.5, 2.5, 3.5, 4.5, 5.5};
        out[r].assign(5, 0);
        const double* send = r == 2 ? x.data() : nullptr;
        absl::Status s = RingBroadcast(send, out[r].data(), 5, DataType::kF64, 2, comm, stream);
        return s.ok() ? stream.Synchronize() : s;
      },
      Options())));
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(out[r], (std::vector<double>{1.5, 2.5, 3.5, 4.5, 5.5})) << "rank " << r;
}

// 3 ranks, one element per block: rank r sends 10 r + p to rank p; rank p receives {p, 10 + p, 20 + p}.
TEST(RingAllToAll, ThreeRanks) {
  std::vector<std::vector<int64_t>> out(3);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      3,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<int64_t> x{10 * r + 0, 10 * r + 1, 10 * r + 2};
        out[r].assign(3, -1);
        absl::Status s = RingAllToAll(x.data(), out[r].data(), 1, DataType::kI64, comm, stream);
        return s.ok() ? stream.Synchronize() : s;
      },
      Options())));
  for (int p = 0; p < 3; ++p) EXPECT_EQ(out[p], (std::vector<int64_t>{p, 10 + p, 20 + p})) << "rank " << p;
}

}  // namespace
}  // namespace distlab::collectives
