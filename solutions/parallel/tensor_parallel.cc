// Lab 4 stage B (solution): column/row-parallel Linear, the f/g operators and the Megatron MLP.
#include "labs/parallel/tensor_parallel.h"

#include <string>

#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::parallel {

using comm::DataType;
using comm::RedOp;
using tensor::Tensor;

namespace {
absl::Status AllReduceSum(comm::Comm& comm, comm::Stream& stream, Tensor& t) {
  if (comm.size() == 1) return absl::OkStatus();
  RETURN_IF_ERROR(comm.AllReduce(t.f32(), t.f32(), t.numel(), DataType::kF32, RedOp::kSum, stream));
  return stream.Synchronize();
}

absl::Status CheckSplit(int64_t dim, int rank, int n, const char* what) {
  if (n <= 0 || rank < 0 || rank >= n) {
    return absl::InvalidArgumentError("rank " + std::to_string(rank) + " of " + std::to_string(n));
  }
  if (dim % n != 0) {
    return absl::InvalidArgumentError(std::string(what) + " dimension " + std::to_string(dim) +
                                      " is not divisible by " + std::to_string(n) + " ranks");
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status GForward(comm::Comm& comm, comm::Stream& stream, Tensor& y) {
  return AllReduceSum(comm, stream, y);
}
absl::Status FBackward(comm::Comm& comm, comm::Stream& stream, Tensor& dx) {
  return AllReduceSum(comm, stream, dx);
}

absl::StatusOr<std::unique_ptr<nn::Linear>> ColumnShard(const nn::Linear& dense, int rank, int n) {
  RETURN_IF_ERROR(CheckSplit(dense.out(), rank, n, "output"));
  const int64_t rows = dense.out() / n, in = dense.in();
  auto shard = std::make_unique<nn::Linear>(dense.weight().name() + ".col" + std::to_string(rank), in, rows,
                                            dense.bias() != nullptr, /*seed=*/0);
  // W [out, in] is row-major: the rank's output features are one contiguous block of rows.
  const float* w = dense.weight().value.f32() + rank * rows * in;
  std::copy(w, w + rows * in, shard->weight().value.f32());
  if (dense.bias() != nullptr) {
    const float* b = dense.bias()->value.f32() + rank * rows;
    std::copy(b, b + rows, shard->bias()->value.f32());
  }
  return shard;
}

absl::StatusOr<std::unique_ptr<nn::Linear>> RowShard(const nn::Linear& dense, int rank, int n) {
  RETURN_IF_ERROR(CheckSplit(dense.in(), rank, n, "input"));
  const int64_t cols = dense.in() / n, out = dense.out(), in = dense.in();
  auto shard = std::make_unique<nn::Linear>(dense.weight().name() + ".row" + std::to_string(rank), cols, out,
                                            /*bias=*/false, /*seed=*/0);
  // The rank's input features are a strided column block of every row.
  const float* w = dense.weight().value.f32();
  float* s = shard->weight().value.f32();
  for (int64_t o = 0; o < out; ++o) {
    std::copy(w + o * in + rank * cols, w + o * in + (rank + 1) * cols, s + o * cols);
  }
  return shard;
}

struct TensorParallelMlp::Impl {
  comm::Comm* comm;
  comm::Stream* stream;
  std::unique_ptr<nn::Linear> fc1;  // column-parallel, with its bias shard
  nn::Gelu gelu;
  std::unique_ptr<nn::Linear> fc2;       // row-parallel, no bias
  std::unique_ptr<nn::Parameter> bias2;  // replicated
};

TensorParallelMlp::TensorParallelMlp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelMlp::~TensorParallelMlp() = default;

absl::StatusOr<std::unique_ptr<TensorParallelMlp>> TensorParallelMlp::Create(comm::Comm& comm,
                                                                             comm::Stream& stream,
                                                                             nn::Mlp& dense) {
  if (dense.fc2().bias() == nullptr) return absl::InvalidArgumentError("the MLP needs fc2's bias");
  auto impl = std::make_unique<Impl>();
  impl->comm = &comm;
  impl->stream = &stream;
  ASSIGN_OR_RETURN(impl->fc1, ColumnShard(dense.fc1(), comm.rank(), comm.size()));
  ASSIGN_OR_RETURN(impl->fc2, RowShard(dense.fc2(), comm.rank(), comm.size()));
  impl->bias2 =
      std::make_unique<nn::Parameter>(dense.fc2().bias()->name(), dense.fc2().bias()->value.shape());
  tensor::Copy(dense.fc2().bias()->value, impl->bias2->value);
  return std::unique_ptr<TensorParallelMlp>(new TensorParallelMlp(std::move(impl)));
}

absl::StatusOr<Tensor> TensorParallelMlp::Forward(const Tensor& x) {
  Impl& m = *impl_;
  // f: identity forward.  [N, h] -> [N, f/n] -> GELU -> [N, h] partial sums.
  Tensor y = m.fc2->Forward(m.gelu.Forward(m.fc1->Forward(x)));
  RETURN_IF_ERROR(GForward(*m.comm, *m.stream, y));  // g: the one forward all-reduce
  tensor::AddRowBias(m.bias2->value, y);             // after the sum, so it is added once
  m.bias2->MarkUsed();
  return y;
}

absl::StatusOr<Tensor> TensorParallelMlp::Backward(const Tensor& dy) {
  Impl& m = *impl_;
  // g backward: identity. The bias gradient is the full sum over rows on every rank.
  tensor::SumRowsInto(dy, m.bias2->grad);
  m.bias2->GradAccumulated();
  Tensor dx = m.fc1->Backward(m.gelu.Backward(m.fc2->Backward(dy)));
  RETURN_IF_ERROR(FBackward(*m.comm, *m.stream, dx));  // f: the one backward all-reduce
  return dx;
}

std::vector<nn::Parameter*> TensorParallelMlp::Parameters() {
  std::vector<nn::Parameter*> p = impl_->fc1->Parameters();
  p.push_back(&impl_->fc2->weight());
  p.push_back(impl_->bias2.get());
  return p;
}

}  // namespace distlab::parallel
