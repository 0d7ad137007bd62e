// Lab 4 (parallel), stage B: tensor parallelism (Megatron-LM). One layer's matrices are split over the n
// ranks of a tensor-parallel group; every rank sees the whole (replicated) activation x.
//
// Vocabulary: n = tensor-parallel ranks, N = rows, h = hidden, f = MLP inner size (f % n == 0).
//
// Shard maps (nn::Linear keeps W as [out, in], y = x W^T + b):
//   column-parallel Linear  W [f, h] split by rows (output features): rank r holds W[r f/n : (r+1) f/n, :]
//                           and bias[r f/n : (r+1) f/n].
//   row-parallel Linear     W [h, f] split by columns (input features): rank r holds W[:, r f/n : (r+1) f/n]
//                           and no bias.
// Megatron's two conjugate operators (Shoeybi et al. 2019), used by Lab 7 as well:
//   f operator              forward: identity;   backward: all-reduce (sum) of dx.
//   g operator              forward: all-reduce (sum) of y;   backward: identity.
#ifndef DISTLAB_LABS_PARALLEL_TENSOR_PARALLEL_H_
#define DISTLAB_LABS_PARALLEL_TENSOR_PARALLEL_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"
#include "reference/nn/layers.h"

namespace distlab::parallel {

// g forward: y = sum over ranks of y (in place, on `stream`, waited for; one rank: no communication).
absl::Status GForward(comm::Comm& comm, comm::Stream& stream, tensor::Tensor& y);
// f backward: dx = sum over ranks of dx (in place, waited for; one rank: no communication).
absl::Status FBackward(comm::Comm& comm, comm::Stream& stream, tensor::Tensor& dx);

// Rank `rank` of `n`'s shard of a dense Linear. Error when the split dimension is not divisible by n.
absl::StatusOr<std::unique_ptr<nn::Linear>> ColumnShard(const nn::Linear& dense, int rank, int n);
// The row-parallel shard keeps no bias: the layer's bias is not sharded, and stays the caller's.
absl::StatusOr<std::unique_ptr<nn::Linear>> RowShard(const nn::Linear& dense, int rank, int n);

// The Megatron MLP on one rank: fc1 column-parallel, fc2 row-parallel, fc2's bias replicated (every rank
// holds all of it). Communication: exactly one all-reduce of N h floats in forward and one in backward,
// nothing else.
class TensorParallelMlp {
 public:
  // Shards `dense` (an nn::Mlp with biases) for comm.rank() of comm.size().
  static absl::StatusOr<std::unique_ptr<TensorParallelMlp>> Create(comm::Comm& comm, comm::Stream& stream,
                                                                   nn::Mlp& dense);
  ~TensorParallelMlp();
  // x [N, h] (the same on every rank) -> y [N, h] (the same on every rank), equal to dense.Forward(x).
  absl::StatusOr<tensor::Tensor> Forward(const tensor::Tensor& x);
  // dy [N, h] (the same on every rank) -> dx [N, h] (the same on every rank), equal to dense.Backward(dy);
  // accumulates into each parameter's grad its slice of the dense gradient (fc2's bias: all of it).
  absl::StatusOr<tensor::Tensor> Backward(const tensor::Tensor& dy);
  // fc1 shard (weight, bias), fc2 shard (weight), fc2 bias (replicated).
  std::vector<nn::Parameter*> Parameters();

  struct Impl;

 private:
  explicit TensorParallelMlp(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::parallel

#endif  // DISTLAB_LABS_PARALLEL_TENSOR_PARALLEL_H_
