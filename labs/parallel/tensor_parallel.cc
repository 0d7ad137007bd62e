// Lab 4 (parallel), stage B: tensor parallelism -- your implementation.
//
// The contracts are in labs/parallel/tensor_parallel.h (the shard maps, f and g, the MLP); the idea in
// notes/04-parallel.md section 3. Lab 7 calls your ColumnShard, RowShard, GForward and FBackward: keep them
// exactly as the header says. Stuck after trying? ./labctl hint parallel B.
#include "labs/parallel/tensor_parallel.h"

#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::parallel {

using tensor::Tensor;

// TODO(parallel stage B): GForward -- contract: tensor_parallel.h (g operator, GForward); idea:
//   notes/04-parallel.md §3. Tools: comm.AllReduce on `stream` works in place (send == recv);
//   stream.Synchronize() waits for it.
absl::Status GForward(comm::Comm& comm, comm::Stream& stream, Tensor& y) {
  return Unimplemented("parallel", "B", "GForward");
}

// TODO(parallel stage B): FBackward -- contract: tensor_parallel.h (f operator, FBackward); idea:
//   notes/04-parallel.md §3.
absl::Status FBackward(comm::Comm& comm, comm::Stream& stream, Tensor& dx) {
  return Unimplemented("parallel", "B", "FBackward");
}

// TODO(parallel stage B): ColumnShard -- contract: tensor_parallel.h (column-parallel shard map,
//   ColumnShard); idea: notes/04-parallel.md §3. Tools: nn::Linear(name, in, out, bias, seed) makes a fresh
//   layer; weight().value is row-major [out, in] (f32() gives the floats).
//   Errors: InvalidArgument naming the numbers when the rank is outside [0, n) or out % n != 0.
absl::StatusOr<std::unique_ptr<nn::Linear>> ColumnShard(const nn::Linear& dense, int rank, int n) {
  return Unimplemented("parallel", "B", "ColumnShard");
}

// TODO(parallel stage B): RowShard -- contract: tensor_parallel.h (row-parallel shard map, RowShard); idea:
//   notes/04-parallel.md §3. Errors: InvalidArgument when the rank is outside [0, n) or in % n != 0.
//   In a row-major [out, in] matrix, where do the input features a rank owns lie?
absl::StatusOr<std::unique_ptr<nn::Linear>> RowShard(const nn::Linear& dense, int rank, int n) {
  return Unimplemented("parallel", "B", "RowShard");
}

// Whatever state the block needs (it owns its shards and the replicated fc2 bias).
struct TensorParallelMlp::Impl {};

TensorParallelMlp::TensorParallelMlp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelMlp::~TensorParallelMlp() = default;

// TODO(parallel stage B): TensorParallelMlp::Create -- contract: tensor_parallel.h (TensorParallelMlp);
//   idea: notes/04-parallel.md §3. Tools: nn::Parameter(name, shape) for a parameter of your own,
//   tensor::Copy. Errors: InvalidArgument when fc2 has no bias.
absl::StatusOr<std::unique_ptr<TensorParallelMlp>> TensorParallelMlp::Create(comm::Comm& comm,
                                                                             comm::Stream& stream,
                                                                             nn::Mlp& dense) {
  return Unimplemented("parallel", "B", "TensorParallelMlp::Create");
}

// TODO(parallel stage B): Forward -- contract: tensor_parallel.h (Forward: equal to the dense MLP, one
//   all-reduce); idea: notes/04-parallel.md §3. Tools: each shard's Forward, nn::Gelu, GForward,
//   tensor::AddRowBias; a parameter you apply yourself is marked with MarkUsed() (nn/parameter.h).
//   After each operator, what does a rank hold: a slice of the dense value, a partial sum, or all of it?
absl::StatusOr<Tensor> TensorParallelMlp::Forward(const Tensor& x) {
  return Unimplemented("parallel", "B", "TensorParallelMlp::Forward");
}

// TODO(parallel stage B): Backward -- contract: tensor_parallel.h (Backward: equal to the dense MLP, one
//   all-reduce); idea: notes/04-parallel.md §3. Tools: each layer's Backward, FBackward,
//   tensor::SumRowsInto; a gradient you add yourself is reported with GradAccumulated().
//   Which gradients are partial sums over the ranks, and which are already whole on every rank?
absl::StatusOr<Tensor> TensorParallelMlp::Backward(const Tensor& dy) {
  return Unimplemented("parallel", "B", "TensorParallelMlp::Backward");
}

// TODO(parallel stage B): Parameters -- contract: tensor_parallel.h (Parameters: the order it names).
std::vector<nn::Parameter*> TensorParallelMlp::Parameters() {
  throw NotImplementedError("parallel", "B", "TensorParallelMlp::Parameters");
}

}  // namespace distlab::parallel
