// Public tests of stage D (stretch): recursive halving-doubling all-reduce -- worked examples, and one case
// on drawn inputs (the last).
#include "labs/collectives/halving_doubling.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
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

// Drawn inputs, as the hidden tests check the rule (on inputs drawn from a fresh grading seed each time):
// four rounds, each on 2 or 4 ranks with a drawn dtype, op, count and placement and random data, against
// the built-in AllReduce. A failing graded case names its seed S; with
//   bazel test //labs/collectives:halving_doubling_test --test_env=DISTLAB_GRADING_SEED=S
// this case draws inputs of the same kind (not the same ones). Without the variable the seed is 1.
TEST(HalvingDoublingAllReduce, MatchesBuiltinOnDrawnInputs) {
  testing::CaseRandom rng;
  const std::vector<comm::DataType> dtypes(std::begin(comm::kAllDataTypes), std::end(comm::kAllDataTypes));
  const std::vector<comm::RedOp> ops(std::begin(comm::kAllRedOps), std::end(comm::kAllRedOps));
  for (int round = 0; round < 4; ++round) {
    const int n = rng.Pick(std::vector<int>{2, 4, 4});  // at most 4: the GPU variant runs on 4 GPUs
    const comm::DataType dtype = rng.Pick(dtypes);
    const comm::RedOp op = rng.Pick(ops);
    const size_t count = static_cast<size_t>(round == 0 ? rng.Int(1, n) : rng.Int(n + 1, 500));
    const bool in_place = rng.Chance(0.5);
    const size_t es = comm::SizeOf(dtype);
    // Every rank's data, drawn here: integers of any value, floats in [-2, 2] ([0.5, 1.5] for prod), 16-bit
    // floats small integers (powers of two for prod), so every op is exact or within tolerance.
    std::vector<std::vector<char>> in(n, std::vector<char>(count * es));
    for (auto& buf : in) {
      for (size_t i = 0; i < count; ++i) {
        const uint64_t bits = rng.Next();
        double v;
        if (dtype == comm::DataType::kI32 || dtype == comm::DataType::kI64 || dtype == comm::DataType::kU8) {
          std::memcpy(buf.data() + i * es, &bits, es);
          continue;
        }
        if (dtype == comm::DataType::kF32 || dtype == comm::DataType::kF64) {
          const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;
          v = op == comm::RedOp::kProd ? 0.5 + u : -2.0 + 4.0 * u;
        } else {
          v = op == comm::RedOp::kProd ? std::vector<double>{0.5, 1.0, 2.0}[bits % 3]
                                       : static_cast<double>(static_cast<int>(bits % 17) - 8);
        }
        comm::SetElementFromDouble(buf.data(), i, dtype, v);
      }
    }
    const double tol = dtype == comm::DataType::kF32    ? 1e-4
                       : dtype == comm::DataType::kF64  ? 1e-12
                       : dtype == comm::DataType::kBF16 ? 1e-2
                       : dtype == comm::DataType::kF16  ? 1e-3
                                                        : 0;
    std::vector<std::string> why(n);
    comm::CommOptions options;
    options.timeout = std::chrono::milliseconds(3000);
    std::vector<absl::Status> st = comm::RunRanks(
        n,
        [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
          std::vector<char> out(count * es, 0x5a), ref(count * es), work = in[r];
          void* recv = in_place ? work.data() : out.data();
          absl::Status s = HalvingDoublingAllReduce(in_place ? work.data() : in[r].data(), recv, count, dtype,
                                                    op, comm, stream);
          if (s.ok()) s = stream.Synchronize();
          if (!s.ok()) return s;
          if (comm.stats().collective_calls != 0)
            return absl::InternalError("a built-in collective was called");
          s = comm.AllReduce(in[r].data(), ref.data(), count, dtype, op, stream);
          if (s.ok()) s = stream.Synchronize();
          if (!s.ok()) return s;
          for (size_t i = 0; i < count && why[r].empty(); ++i) {
            const double g = comm::ElementAsDouble(recv, i, dtype),
                         w = comm::ElementAsDouble(ref.data(), i, dtype);
            const bool ok = tol == 0
                                ? std::memcmp(static_cast<char*>(recv) + i * es, ref.data() + i * es, es) == 0
                                : std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w));
            if (!ok) {
              why[r] = "element " + std::to_string(i) + " is " + std::to_string(g) + ", the built-in gives " +
                       std::to_string(w);
            }
          }
          return absl::OkStatus();
        },
        options);
    const std::string input = std::string(comm::Name(dtype)) + " " + std::string(comm::Name(op)) + " on " +
                              std::to_string(n) + " ranks, count " + std::to_string(count) +
                              (in_place ? ", in place" : ", out of place");
    for (int r = 0; r < n; ++r) {
      if (!st[r].ok()) FAIL() << input << ": rank " << r << ": " << st[r] << "\n" << testing::SeedNote();
      if (!why[r].empty()) FAIL() << input << ": rank " << r << ": " << why[r] << "\n" << testing::SeedNote();
    }
  }
}

}  // namespace
}  // namespace distlab::collectives
