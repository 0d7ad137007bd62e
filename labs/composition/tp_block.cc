// Lab 7 (composition), stage B: the tensor-parallel GPT block -- your implementation.
//
// Read labs/composition/tp_block.h and notes/07-composition.md section 2. You call your own Lab 4 functions
// (labs/parallel/tensor_parallel.h): ColumnShard, RowShard, GForward, FBackward.
#include "labs/composition/tp_block.h"

#include "labs/parallel/tensor_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

using tensor::Tensor;

// Your block's state: the tp comm and stream, the sequence length and local head count, the names, copies
// of the two LayerNorms (nn::LayerNorm, values copied with tensor::Copy), the column shards q, k, v, fc1,
// the row shards o, fc2, and the two replicated biases as nn::Parameter.
struct TensorParallelBlock::Impl {};

TensorParallelBlock::TensorParallelBlock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelBlock::~TensorParallelBlock() = default;

// TODO(composition stage B): TensorParallelBlock::Create
//  1. heads % t or inner % t != 0: InvalidArgument "8 heads are not divisible by 3 tp ranks" (or the inner
//     size).
//  2. Copy ln1 and ln2; ColumnShard q, k, v and fc1; RowShard o and fc2 (rank tp.rank() of tp.size()); copy
//     the biases of o and fc2 into replicated parameters named as dense's.
//  3. Local heads a / t; names = dense.ParameterNames().
absl::StatusOr<std::unique_ptr<TensorParallelBlock>> TensorParallelBlock::Create(comm::Comm& tp,
                                                                                 comm::Stream& stream,
                                                                                 const nn::GptBlock& dense) {
  return Unimplemented("composition", "B", "TensorParallelBlock::Create");
}

// TODO(composition stage B): TensorParallelBlock::Forward
//  Fill `cache` as nn::GptBlock::Forward does (reference/nn/transformer.cc is your model), with local
//  shapes: u = LN1(x); q, k, v = Apply on u; ctx = nn::CausalAttention with the LOCAL head count; the
//  row-parallel o gives partial sums: GForward, then add o's bias (and MarkUsed it), then the residual.
//  The same for the MLP: LN2, fc1, GELU (tensor::GeluForward), fc2, GForward, + bias, + residual.
//  Use Linear::Apply (no cache inside the layer): several micro-batches may be in flight.
absl::StatusOr<Tensor> TensorParallelBlock::Forward(const Tensor& x, nn::BlockCache* cache) {
  return Unimplemented("composition", "B", "TensorParallelBlock::Forward");
}

// TODO(composition stage B): TensorParallelBlock::Backward
//  Reverse order, from the cache only. Replicated biases: grad += sum of the rows of their output gradient
//  (tensor::SumRowsInto, then GradAccumulated). Column layers' input gradients are partial sums over the
//  local columns: FBackward them before the LayerNorm backward. No other communication. Release the cache.
absl::StatusOr<Tensor> TensorParallelBlock::Backward(const Tensor& dy, nn::BlockCache* cache) {
  return Unimplemented("composition", "B", "TensorParallelBlock::Backward");
}

// TODO(composition stage B): Parameters, in nn::GptBlock order with your local tensors.
std::vector<nn::Parameter*> TensorParallelBlock::Parameters() {
  throw NotImplementedError("composition", "B", "TensorParallelBlock::Parameters");
}

// TODO(composition stage B): ParameterNames (dense's names) and local_heads.
std::vector<std::string> TensorParallelBlock::ParameterNames() const {
  throw NotImplementedError("composition", "B", "TensorParallelBlock::ParameterNames");
}
int TensorParallelBlock::local_heads() const {
  throw NotImplementedError("composition", "B", "TensorParallelBlock::local_heads");
}

}  // namespace distlab::composition
