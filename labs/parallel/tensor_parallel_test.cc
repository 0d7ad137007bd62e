// Public tests of Lab 4 stage B (tensor parallelism).
#include "labs/parallel/tensor_parallel.h"

#include <string>

#include "gtest/gtest.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

// W [4, 2] split over 2 ranks:          column shard of rank 1 = rows 2..3;  row shard needs in % n == 0.
//   [ 0  1 ]
//   [ 2  3 ]
//   [ 4  5 ]  <- rank 1
//   [ 6  7 ]  <- rank 1
TEST(ColumnShard, TakesABlockOfOutputRows) {
  nn::Linear dense("d", 2, 4, true, 1);
  for (int i = 0; i < 8; ++i) dense.weight().value.Set(i, static_cast<float>(i));
  ASSERT_OK_AND_ASSIGN(auto shard, ColumnShard(dense, 1, 2));
  EXPECT_EQ(shard->weight().value.ToVector(), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_FALSE(RowShard(dense, 0, 3).ok()) << "in = 2 does not split over 3 ranks";
}

// The Megatron MLP on 2 ranks against the dense one, forward. Its sizes, rows and weights are drawn from the
// grading seed (tools/testing/test_support.h), as in the hidden tests:
// `bazel test //labs/parallel:tensor_parallel_test --test_env=DISTLAB_GRADING_SEED=S` draws other ones.
TEST(TensorParallelMlp, ForwardEqualsDenseWithOneAllReduce) {
  distlab::testing::CaseRandom rng;
  const int64_t h = rng.Int(4, 12), f = 2 * rng.Int(2, 8), rows = rng.Int(2, 7);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  nn::Mlp dense("mlp", h, f, seed);
  tensor::FillNormal(dense.fc1().bias()->value, seed + 1, 0.3f);
  tensor::FillNormal(dense.fc2().bias()->value, seed + 2, 0.3f);
  tensor::Tensor x({rows, h});
  tensor::FillNormal(x, seed + 3, 1.f);
  const tensor::Tensor want = dense.Forward(x);
  const std::string input = "Mlp(hidden " + std::to_string(h) + ", inner " + std::to_string(f) + ", seed " +
                            std::to_string(seed) + ") with biases, " + std::to_string(rows) + " rows";
  auto statuses = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp copy("mlp", h, f, seed);  // the same seed: the same dense weights on every rank
    tensor::Copy(dense.fc1().bias()->value, copy.fc1().bias()->value);
    tensor::Copy(dense.fc2().bias()->value, copy.fc2().bias()->value);
    auto tp = TensorParallelMlp::Create(comm, stream, copy);
    if (!tp.ok()) return tp.status();
    comm.ResetStats();
    auto y = (*tp)->Forward(x);
    if (!y.ok()) return y.status();
    EXPECT_LT(tensor::MaxAbsDiff(*y, want), 1e-5f)
        << "rank " << rank << ", " << input << "; " << distlab::testing::SeedNote();
    EXPECT_EQ(comm.stats().collective_calls, 1u) << "exactly one all-reduce (g) in forward; " << input;
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(statuses));
}

// W [2, 4] (out = 2, in = 4) over 2 ranks: the row-parallel shard takes a block of input COLUMNS of every
// row, and no bias:
//            in 0  1 | 2  3
//   out 0:    [ 0  1 | 2  3 ]      rank 0: [ 0  1 ]      rank 1: [ 2  3 ]
//   out 1:    [ 4  5 | 6  7 ]              [ 4  5 ]              [ 6  7 ]
TEST(RowShard, TakesABlockOfInputColumns) {
  nn::Linear dense("d", /*in=*/4, /*out=*/2, true, 1);
  for (int i = 0; i < 8; ++i) dense.weight().value.Set(i, static_cast<float>(i));
  const std::vector<std::vector<float>> want = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_OK_AND_ASSIGN(auto shard, RowShard(dense, rank, 2));
    EXPECT_EQ(shard->weight().value.shape(), (tensor::Shape{2, 2})) << "rank " << rank;
    EXPECT_EQ(shard->weight().value.ToVector(), want[rank]) << "rank " << rank;
    EXPECT_EQ(shard->bias(), nullptr) << "rank " << rank;
  }
}

// The Megatron MLP, h = 8, f = 16, N = 5 rows, on 2 ranks, with non-zero biases. Rank r holds
//   fc1: rows [8r, 8r + 8) of W1 [16, 8] and of b1 [16]      fc2: columns [8r, 8r + 8) of W2 [8, 16]
//   fc2's bias b2 [8]: all of it, on both ranks
// Backward (after the forward) returns the dense dx on both ranks with exactly one all-reduce of N h = 40
// floats, and leaves in each parameter's grad its slice of the dense gradient (b2: the whole of it).
TEST(TensorParallelMlp, BackwardEqualsDenseWithOneAllReduce) {
  nn::Mlp dense("mlp", 8, 16, 3);
  tensor::FillNormal(dense.fc1().bias()->value, 6, 0.5f);
  tensor::FillNormal(dense.fc2().bias()->value, 7, 0.5f);
  tensor::Tensor x({5, 8}), dy({5, 8});
  tensor::FillNormal(x, 8, 1.f);
  tensor::FillNormal(dy, 9, 1.f);
  nn::ZeroGrads(dense.Parameters());
  const tensor::Tensor y_dense = dense.Forward(x);
  const tensor::Tensor dx_dense = dense.Backward(dy);
  const std::vector<float> w1 = dense.fc1().weight().grad.ToVector(),
                           b1 = dense.fc1().bias()->grad.ToVector(),
                           w2 = dense.fc2().weight().grad.ToVector(),
                           b2 = dense.fc2().bias()->grad.ToVector();
  auto statuses = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp copy("mlp", 8, 16, 3);
    tensor::Copy(dense.fc1().bias()->value, copy.fc1().bias()->value);
    tensor::Copy(dense.fc2().bias()->value, copy.fc2().bias()->value);
    auto tp = TensorParallelMlp::Create(comm, stream, copy);
    if (!tp.ok()) return tp.status();
    const std::vector<nn::Parameter*> params = (*tp)->Parameters();
    if (params.size() != 4) return absl::InternalError("Parameters() must list 4 parameters");
    nn::ZeroGrads(params);
    auto y = (*tp)->Forward(x);
    if (!y.ok()) return y.status();
    EXPECT_LT(tensor::MaxAbsDiff(*y, y_dense), 1e-5f) << "rank " << rank << ": forward, with biases";
    comm.ResetStats();
    auto dx = (*tp)->Backward(dy);
    if (!dx.ok()) return dx.status();
    EXPECT_LT(tensor::MaxAbsDiff(*dx, dx_dense), 1e-5f) << "rank " << rank << ": dx";
    EXPECT_EQ(comm.stats().collective_calls, 1u) << "exactly one all-reduce in backward";
    EXPECT_EQ(comm.stats().collective_bytes, 5u * 8 * 4) << "of N h floats";
    // The slices: W1 rows 8r.. (8 floats each), b1 entries 8r.., W2 columns 8r.. of each of its 8 rows.
    const std::vector<float> g_w1 = params[0]->grad.ToVector(), g_b1 = params[1]->grad.ToVector(),
                             g_w2 = params[2]->grad.ToVector(), g_b2 = params[3]->grad.ToVector();
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(g_w1[i], w1[64 * rank + i], 1e-5) << "fc1 weight, rank " << rank;
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(g_b1[i], b1[8 * rank + i], 1e-5) << "fc1 bias, rank " << rank;
    for (int row = 0; row < 8; ++row) {
      for (int c = 0; c < 8; ++c) {
        EXPECT_NEAR(g_w2[8 * row + c], w2[16 * row + 8 * rank + c], 1e-5) << "fc2 weight, rank " << rank;
      }
    }
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(g_b2[i], b2[i], 1e-5) << "fc2 bias, rank " << rank;
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::parallel
