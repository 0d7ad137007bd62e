// Hidden tests of Lab 4 stage B: tensor-parallel shards and the Megatron MLP against the dense MLP.
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/tensor_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

using tensor::Tensor;

nn::Linear Numbered(int64_t in, int64_t out) {
  nn::Linear lin("d", in, out, true, 1);
  for (int64_t i = 0; i < in * out; ++i) lin.weight().value.Set(i, static_cast<float>(i));
  for (int64_t i = 0; i < out; ++i) lin.bias()->value.Set(i, 100.f + i);
  return lin;
}

TEST(ShardsHidden, ColumnShardTakesOutputRowsAndBias) {
  nn::Linear dense = Numbered(3, 4);  // W [4, 3] = 0..11
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, ColumnShard(dense, r, 2));
    ASSERT_EQ(s->weight().value.shape(), (tensor::Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(s->weight().value.Get(i), 6 * r + i);
    ASSERT_NE(s->bias(), nullptr);
    EXPECT_EQ(s->bias()->value.ToVector(), (std::vector<float>{100.f + 2 * r, 101.f + 2 * r}));
  }
}

TEST(ShardsHidden, RowShardTakesInputColumnsWithoutBias) {
  nn::Linear dense = Numbered(4, 3);  // W [3, 4]: row o = 4o .. 4o+3
  ASSERT_OK_AND_ASSIGN(auto s, RowShard(dense, 1, 2));
  ASSERT_EQ(s->weight().value.shape(), (tensor::Shape{3, 2}));
  EXPECT_EQ(s->weight().value.ToVector(), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(s->bias(), nullptr);
}

TEST(ShardsHidden, IndivisibleOrBadRankIsAnError) {
  nn::Linear dense = Numbered(4, 6);
  EXPECT_EQ(ColumnShard(dense, 0, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RowShard(dense, 0, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ColumnShard(dense, 2, 2).ok());
}

// The Megatron MLP on n ranks against the dense MLP. kForward checks the output and the forward
// communication (one all-reduce of N h floats, g); kBackward runs the same forward unchecked, then checks
// the input gradient, every shard's gradient (a slice of the dense gradient) and the backward communication
// (one all-reduce of N h floats, f). Separate cases, so a failure says which direction is wrong.
enum class Direction { kForward, kBackward };

void CheckMegatronMlp(int n, Direction dir) {
  const int64_t h = 8, f = 16, rows = 5;
  nn::Mlp dense("mlp", h, f, 3);
  tensor::FillNormal(dense.fc1().bias()->value, 21, 0.3f);
  tensor::FillNormal(dense.fc2().bias()->value, 22, 0.3f);
  Tensor x({rows, h}), dy({rows, h});
  tensor::FillNormal(x, 4, 1.f);
  tensor::FillNormal(dy, 5, 1.f);
  nn::ZeroGrads(dense.Parameters());
  const Tensor y_want = dense.Forward(x);
  const Tensor dx_want = dense.Backward(dy);
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp copy("mlp", h, f, 3);
    tensor::Copy(dense.fc1().bias()->value, copy.fc1().bias()->value);
    tensor::Copy(dense.fc2().bias()->value, copy.fc2().bias()->value);
    ASSIGN_OR_RETURN(auto tp, TensorParallelMlp::Create(comm, stream, copy));
    std::vector<nn::Parameter*> params = tp->Parameters();
    if (params.size() != 4) return absl::InternalError("expected 4 parameters");
    nn::ZeroGrads(params);
    comm.ResetStats();
    ASSIGN_OR_RETURN(Tensor y, tp->Forward(x));
    if (dir == Direction::kForward) {
      EXPECT_LT(tensor::MaxAbsDiff(y, y_want), 1e-5f)
          << "forward output differs from the dense MLP, rank " << rank;
      EXPECT_EQ(comm.stats().collective_calls, 1u) << "forward: exactly one all-reduce";
      EXPECT_EQ(comm.stats().collective_bytes, static_cast<uint64_t>(rows * h * 4))
          << "forward: the all-reduce carries N h floats";
      return absl::OkStatus();
    }
    comm.ResetStats();
    ASSIGN_OR_RETURN(Tensor dx, tp->Backward(dy));
    EXPECT_LT(tensor::MaxAbsDiff(dx, dx_want), 1e-5f)
        << "backward dx differs from the dense MLP, rank " << rank;
    EXPECT_EQ(comm.stats().collective_calls, 1u) << "backward: exactly one all-reduce";
    EXPECT_EQ(comm.stats().collective_bytes, static_cast<uint64_t>(rows * h * 4))
        << "backward: the all-reduce carries N h floats";
    // fc1 shard: rows [rank f/n, (rank+1) f/n) of dW1 and db1.
    const int64_t fr = f / n;
    for (int64_t i = 0; i < fr * h; ++i) {
      EXPECT_NEAR(params[0]->grad.Get(i), dense.fc1().weight().grad.Get(rank * fr * h + i), 1e-5)
          << "fc1 weight gradient, rank " << rank;
    }
    for (int64_t i = 0; i < fr; ++i) {
      EXPECT_NEAR(params[1]->grad.Get(i), dense.fc1().bias()->grad.Get(rank * fr + i), 1e-5)
          << "fc1 bias gradient, rank " << rank;
    }
    // fc2 shard: columns [rank f/n, ...) of every row of dW2 [h, f].
    for (int64_t o = 0; o < h; ++o)
      for (int64_t c = 0; c < fr; ++c)
        EXPECT_NEAR(params[2]->grad.Get(o * fr + c), dense.fc2().weight().grad.Get(o * f + rank * fr + c),
                    1e-5)
            << "fc2 weight gradient, rank " << rank;
    EXPECT_LT(tensor::MaxAbsDiff(params[3]->grad, dense.fc2().bias()->grad), 1e-5f)
        << "fc2 bias gradient, rank " << rank;
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

TEST(TensorParallelMlpHidden, ForwardEqualsDenseOnTwoRanks) { CheckMegatronMlp(2, Direction::kForward); }
TEST(TensorParallelMlpHidden, BackwardEqualsDenseOnTwoRanks) { CheckMegatronMlp(2, Direction::kBackward); }
TEST(TensorParallelMlpHidden, ForwardEqualsDenseOnFourRanks) { CheckMegatronMlp(4, Direction::kForward); }
TEST(TensorParallelMlpHidden, BackwardEqualsDenseOnFourRanks) { CheckMegatronMlp(4, Direction::kBackward); }

// With W2 = 0 the dense MLP's output is its fc2 bias on every row: the row-parallel partial sums are all
// zero, so the tensor-parallel output is exactly b2 when the bias is added once, after the all-reduce
// (tensor_parallel.h), and n b2 when every rank adds it before the sum.
TEST(TensorParallelMlpHidden, RowParallelBiasIsAddedOnce) {
  const int n = 4;
  const int64_t h = 8, f = 16, rows = 3;
  nn::Mlp dense("mlp", h, f, 3);
  tensor::FillNormal(dense.fc1().bias()->value, 31, 0.3f);
  tensor::FillNormal(dense.fc2().bias()->value, 32, 0.5f);
  tensor::Fill(dense.fc2().weight().value, 0.f);
  Tensor x({rows, h});
  tensor::FillNormal(x, 33, 1.f);
  const Tensor y_want = dense.Forward(x);
  const std::vector<float> b2 = dense.fc2().bias()->value.ToVector();
  for (int64_t i = 0; i < rows * h; ++i) ASSERT_EQ(y_want.Get(i), b2[i % h]);  // the premise
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp copy("mlp", h, f, 3);
    tensor::Copy(dense.fc1().bias()->value, copy.fc1().bias()->value);
    tensor::Copy(dense.fc2().bias()->value, copy.fc2().bias()->value);
    tensor::Fill(copy.fc2().weight().value, 0.f);
    ASSIGN_OR_RETURN(auto tp, TensorParallelMlp::Create(comm, stream, copy));
    ASSIGN_OR_RETURN(Tensor y, tp->Forward(x));
    EXPECT_LT(tensor::MaxAbsDiff(y, y_want), 1e-6f)
        << "rank " << rank << " of " << n << ": with W2 = 0 the output must be b2 itself; y[0] = " << y.Get(0)
        << ", b2[0] = " << b2[0] << " (the row-parallel bias is added once, after the all-reduce)";
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

TEST(TensorParallelMlpHidden, OperatorsSumOverRanks) {
  auto st = comm::RunRanks(3, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    Tensor a({2}), b({2});
    tensor::Fill(a, 1.f + rank);
    tensor::Fill(b, 10.f * (rank + 1));
    RETURN_IF_ERROR(GForward(comm, stream, a));
    RETURN_IF_ERROR(FBackward(comm, stream, b));
    EXPECT_EQ(a.Get(1), 6.f);
    EXPECT_EQ(b.Get(0), 60.f);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

}  // namespace
}  // namespace distlab::parallel
