// Public test of stage D (stretch): recursive halving-doubling all-reduce.
#include "labs/collectives/halving_doubling.h"

#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

// 4 ranks, count 6: halving at d = 2 splits [0,6) into [0,3) | [3,6), at d = 1 into pieces of 1-2
// elements; rank r ends owning a quarter, and doubling brings the whole sum back:
//   x_r[i] = r + 10 i   ->   sum = 6 + 40 i.
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

TEST(HalvingDoublingAllReduce, RejectsThreeRanks) {
  std::vector<absl::Status> st = comm::RunRanks(3, [](int, comm::Comm& comm, comm::Stream& stream) {
    int32_t x = 1;
    return HalvingDoublingAllReduce(&x, &x, 1, comm::DataType::kI32, comm::RedOp::kSum, comm, stream);
  });
  for (const absl::Status& s : st) EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace distlab::collectives
