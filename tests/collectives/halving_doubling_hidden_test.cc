// Hidden tests of stage D (stretch): recursive halving-doubling all-reduce against the built-in.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/halving_doubling.h"
#include "reference/base/status.h"
#include "tests/collectives/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using comm::DataType;
using comm::RedOp;

// "" or what went wrong; also checks the total bytes: 2(n-1) * S over all ranks.
std::string Check(DataType t, RedOp op, int n, size_t count, bool in_place) {
  std::vector<std::string> why(n);
  std::vector<uint64_t> sent(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<char> in = testutil::Input(t, op, r, count, 8), out(in.size(), 0x5a), ref(in.size());
        std::vector<char> work = in;
        void* recv = in_place ? work.data() : out.data();
        const void* send = in_place ? work.data() : in.data();
        comm.ResetStats();
        RETURN_IF_ERROR(HalvingDoublingAllReduce(send, recv, count, t, op, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        sent[r] = comm.stats().bytes_sent;
        if (comm.stats().collective_calls != 0) why[r] = "called a built-in collective";
        RETURN_IF_ERROR(comm.AllReduce(in.data(), ref.data(), count, t, op, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (why[r].empty()) why[r] = testutil::Compare(recv, ref.data(), count, t);
        return absl::OkStatus();
      },
      testutil::Options());
  std::string msg;
  for (int r = 0; r < n; ++r) {
    if (!statuses[r].ok()) msg += "rank " + std::to_string(r) + ": " + statuses[r].ToString() + "\n";
    if (!why[r].empty()) msg += "rank " + std::to_string(r) + ": " + why[r] + "\n";
  }
  uint64_t total = 0;
  for (uint64_t s : sent) total += s;
  const uint64_t want = 2ull * (n - 1) * count * comm::SizeOf(t);
  if (msg.empty() && total != want) {
    msg = "all ranks sent " + std::to_string(total) + " bytes; 2(n-1) * S = " + std::to_string(want);
  }
  return msg;
}

TEST(HalvingDoubling, MatchesBuiltin) {
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    for (RedOp op : {RedOp::kSum, RedOp::kMax, RedOp::kAvg}) {
      const int n = 2 << (k % 3);  // 2, 4, 8
      const size_t count = std::vector<size_t>{1, 3, 7, 100, 1001}[k % 5];
      std::string err = Check(t, op, n, count, k % 2 == 0);
      ASSERT_TRUE(err.empty()) << comm::Name(t) << "/" << comm::Name(op) << " n=" << n << " count=" << count
                               << ":\n"
                               << err;
      ++k;
    }
  }
}

// halving_doubling.h: for count >= n, exactly log2 n messages per phase on every rank (2 log2 n in all,
// against the ring's 2(n-1)), and with count a multiple of n exactly the ring's 2(n-1)/n * S bytes each.
TEST(HalvingDoubling, TwoLogNMessagesAndTheRingsBytes) {
  for (int n : {2, 4, 8}) {
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    for (size_t count : {size_t(n), size_t{1001}, size_t(64 * n)}) {
      std::vector<comm::Stats> stats(n);
      auto statuses = comm::RunRanks(
          n,
          [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
            std::vector<char> buf = testutil::Input(DataType::kF32, RedOp::kSum, r, count, 3);
            comm.ResetStats();
            RETURN_IF_ERROR(HalvingDoublingAllReduce(buf.data(), buf.data(), count, DataType::kF32,
                                                     RedOp::kSum, comm, stream));
            RETURN_IF_ERROR(stream.Synchronize());
            stats[r] = comm.stats();
            return absl::OkStatus();
          },
          testutil::Options());
      ASSERT_OK(comm::FirstError(statuses));
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(stats[r].sends, 2u * log2n) << "n=" << n << " count=" << count << " rank " << r;
        EXPECT_EQ(stats[r].recvs, 2u * log2n) << "n=" << n << " count=" << count << " rank " << r;
        if (count % n == 0) {
          EXPECT_EQ(stats[r].bytes_sent, 2 * (n - 1) * count * 4 / n) << "n=" << n << " count=" << count;
        }
      }
    }
  }
}

TEST(HalvingDoubling, RejectsNonPowerOfTwo) {
  auto statuses = comm::RunRanks(
      6,
      [](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        int32_t x = 1;
        absl::Status s = HalvingDoublingAllReduce(&x, &x, 1, DataType::kI32, RedOp::kSum, comm, stream);
        if (s.code() != absl::StatusCode::kInvalidArgument ||
            s.message().find("6") == absl::string_view::npos) {
          return absl::InternalError("6 ranks gave " + s.ToString() + "; want INVALID_ARGUMENT naming 6");
        }
        return absl::OkStatus();
      },
      testutil::Options());
  EXPECT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::collectives
