// Public tests of Lab 4 stage B (tensor parallelism).
#include "labs/parallel/tensor_parallel.h"

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

TEST(TensorParallelMlp, ForwardEqualsDenseWithOneAllReduce) {
  nn::Mlp dense("mlp", 8, 16, 3);
  tensor::Tensor x({5, 8});
  tensor::FillNormal(x, 4, 1.f);
  const tensor::Tensor want = dense.Forward(x);
  auto statuses = comm::RunRanks(2, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp copy("mlp", 8, 16, 3);  // the same seed: the same dense weights on every rank
    auto tp = TensorParallelMlp::Create(comm, stream, copy);
    if (!tp.ok()) return tp.status();
    comm.ResetStats();
    auto y = (*tp)->Forward(x);
    if (!y.ok()) return y.status();
    EXPECT_LT(tensor::MaxAbsDiff(*y, want), 1e-5f);
    EXPECT_EQ(comm.stats().collective_calls, 1u) << "exactly one all-reduce (g) in forward";
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::parallel
