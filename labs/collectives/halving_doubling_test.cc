// Public test of stage D (stretch): recursive halving-doubling all-reduce.
#include "labs/collectives/halving_doubling.h"

#include <chrono>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

// 4 ranks, count 6, x_r[i] = r + 10 i, so every rank must end with sum_r x_r[i] = 6 + 40 i. The halving
// phase, with one consistent choice of several (the rank whose bit d is 0 keeps the lower half, and a range
// [lo, hi) is cut at lo + (hi-lo)/2):
//
//   d = 2, pairs 0-2 and 1-3:  ranks 0, 1 keep [0,3) and send [3,6); ranks 2, 3 keep [3,6), send [0,3)
//                              rank 0 holds x0+x2 on [0,3), rank 1 x1+x3 on [0,3),
//                              rank 2 x0+x2 on [3,6), rank 3 x1+x3 on [3,6)
//   d = 1, pairs 0-1 and 2-3:  rank 0 keeps [0,1), rank 1 [1,3), rank 2 [3,4), rank 3 [4,6)
//                              each now holds the sum over all four ranks on its piece
//
// The doubling phase must grow every piece back to [0,6); in which order it meets its partners is the
// exercise of notes/01-collectives.md section 7.
TEST(HalvingDoublingAllReduce, FourRanksSixInts) {
  std::vector<std::vector<int32_t>> out(4);
  comm::CommOptions options;
  options.timeout = std::chrono::milliseconds(3000);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      4,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        out[r].resize(6);
        for (int i = 0; i < 6; ++i) out[r][i] = r + 10 * i;
        absl::Status s = HalvingDoublingAllReduce(out[r].data(), out[r].data(), 6, comm::DataType::kI32,
                                                  comm::RedOp::kSum, comm, stream);
        return s.ok() ? stream.Synchronize() : s;
      },
      options)));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r], (std::vector<int32_t>{6, 46, 86, 126, 166, 206})) << "rank " << r;
  }
}

// The cost on 4 ranks, count 8 (f32, S = 32 bytes), counted by the communicator's Stats on every rank:
//
//   halving  d = 2: one message of half the array, 4 elements = 16 bytes
//            d = 1: one message of half of that,   2 elements =  8 bytes
//   doubling:       as many bytes again, in two messages           24 bytes
//   in all:         2 log2 n = 4 messages, 48 bytes = 2(n-1)/n * S (the ring: 2(n-1) = 6 messages of 8 bytes)
TEST(HalvingDoublingAllReduce, MessagesAndBytesOnFourRanks) {
  const int n = 4;
  const size_t count = 8;
  std::vector<comm::Stats> stats(n);
  std::vector<std::vector<float>> out(n);
  comm::CommOptions options;
  options.timeout = std::chrono::milliseconds(3000);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<float> x(count);
        for (size_t i = 0; i < count; ++i) x[i] = 100.0f * r + i;
        out[r].assign(count, -1);
        comm.ResetStats();
        absl::Status s = HalvingDoublingAllReduce(x.data(), out[r].data(), count, comm::DataType::kF32,
                                                  comm::RedOp::kSum, comm, stream);
        if (!s.ok()) return s;
        s = stream.Synchronize();
        stats[r] = comm.stats();
        return s;
      },
      options)));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(stats[r].collective_calls, 0u) << "rank " << r << " called a built-in collective";
    EXPECT_EQ(stats[r].sends, 4u) << "rank " << r;
    EXPECT_EQ(stats[r].recvs, 4u) << "rank " << r;
    EXPECT_EQ(stats[r].bytes_sent, 48u) << "rank " << r;
    // sum over ranks of 100 r + i = 600 + 4 i
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ(out[r][i], 600.0f + 4 * i) << "rank " << r << " element " << i;
  }
}

// halving_doubling.h: a rank count that is not a power of two is INVALID_ARGUMENT naming n.
TEST(HalvingDoublingAllReduce, RejectsThreeRanks) {
  std::vector<absl::Status> st = comm::RunRanks(3, [](int, comm::Comm& comm, comm::Stream& stream) {
    int32_t x = 1;
    return HalvingDoublingAllReduce(&x, &x, 1, comm::DataType::kI32, comm::RedOp::kSum, comm, stream);
  });
  for (const absl::Status& s : st) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find('3'), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace distlab::collectives
