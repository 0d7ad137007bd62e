// Lab 4 (parallel), stage B: tensor parallelism -- your implementation.
//
// Read labs/parallel/tensor_parallel.h and notes/04-parallel.md section 3.
#include "labs/parallel/tensor_parallel.h"

#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::parallel {

using tensor::Tensor;

// TODO(parallel stage B): GForward -- in-place SUM all-reduce of y on `stream`, then Synchronize.
//  World size 1: return OK without communicating.
absl::Status GForward(comm::Comm& comm, comm::Stream& stream, Tensor& y) {
  return Unimplemented("parallel", "B", "GForward");
}

// TODO(parallel stage B): FBackward -- the same collective, used on the backward path.
absl::Status FBackward(comm::Comm& comm, comm::Stream& stream, Tensor& dx) {
  return Unimplemented("parallel", "B", "FBackward");
}

// TODO(parallel stage B): ColumnShard
//  1. rank outside [0, n) or dense.out() % n != 0: InvalidArgument naming the numbers.
//  2. A new nn::Linear(in, out/n, bias if dense has one); copy rows [rank*out/n, (rank+1)*out/n) of the
//     dense weight [out, in] and the same slice of the bias.
absl::StatusOr<std::unique_ptr<nn::Linear>> ColumnShard(const nn::Linear& dense, int rank, int n) {
  return Unimplemented("parallel", "B", "ColumnShard");
}

// TODO(parallel stage B): RowShard
//  1. dense.in() % n != 0 (or a bad rank): InvalidArgument.
//  2. A new nn::Linear(in/n, out, NO bias); row o of the shard is dense row o's columns
//     [rank*in/n, (rank+1)*in/n).
absl::StatusOr<std::unique_ptr<nn::Linear>> RowShard(const nn::Linear& dense, int rank, int n) {
  return Unimplemented("parallel", "B", "RowShard");
}

// Your state: comm, stream, the two shards, a GELU, fc2's replicated bias as an nn::Parameter.
struct TensorParallelMlp::Impl {};

TensorParallelMlp::TensorParallelMlp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelMlp::~TensorParallelMlp() = default;

// TODO(parallel stage B): Create -- fc1 -> ColumnShard, fc2 -> RowShard, copy fc2's bias (required).
absl::StatusOr<std::unique_ptr<TensorParallelMlp>> TensorParallelMlp::Create(comm::Comm& comm,
                                                                             comm::Stream& stream,
                                                                             nn::Mlp& dense) {
  return Unimplemented("parallel", "B", "TensorParallelMlp::Create");
}

// TODO(parallel stage B): Forward -- fc1 shard, GELU, fc2 shard, then g (the ONLY forward all-reduce),
//  then add fc2's bias once (MarkUsed on it). Adding it before the all-reduce adds it n times.
absl::StatusOr<Tensor> TensorParallelMlp::Forward(const Tensor& x) {
  return Unimplemented("parallel", "B", "TensorParallelMlp::Forward");
}

// TODO(parallel stage B): Backward -- bias grad += row sums of dy (GradAccumulated), back through fc2,
//  GELU and fc1, then f (the ONLY backward all-reduce) on dx.
absl::StatusOr<Tensor> TensorParallelMlp::Backward(const Tensor& dy) {
  return Unimplemented("parallel", "B", "TensorParallelMlp::Backward");
}

// TODO(parallel stage B): Parameters -- fc1 weight, fc1 bias, fc2 weight, fc2 bias (replicated).
std::vector<nn::Parameter*> TensorParallelMlp::Parameters() {
  throw NotImplementedError("parallel", "B", "TensorParallelMlp::Parameters");
}

}  // namespace distlab::parallel
