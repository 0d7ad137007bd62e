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

// Your block's state. A micro-batch's activations belong in its BlockCache, never here: several may be in
// flight.
struct TensorParallelBlock::Impl {};

TensorParallelBlock::TensorParallelBlock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelBlock::~TensorParallelBlock() = default;

// TODO(composition stage B): TensorParallelBlock::Create -- contract: tp_block.h (Create, the shard map);
//   idea: notes/07-composition.md §2. Tools: Lab 4's ColumnShard and RowShard; nn::LayerNorm, nn::Parameter
//   and tensor::Copy for what a rank holds whole. The block must not keep a reference to `dense`.
absl::StatusOr<std::unique_ptr<TensorParallelBlock>> TensorParallelBlock::Create(comm::Comm& tp,
                                                                                 comm::Stream& stream,
                                                                                 const nn::GptBlock& dense) {
  return Unimplemented("composition", "B", "TensorParallelBlock::Create");
}

// TODO(composition stage B): TensorParallelBlock::Forward -- contract: tp_block.h (Forward, what a test
//   observes); idea: notes/07-composition.md §2. Tools: Linear::Apply (no cache inside the layer),
//   nn::CausalAttention, tensor::GeluForward / AddRowBias / Axpy, Parameter::MarkUsed for a parameter you
//   apply yourself, Lab 4's GForward; the BlockCache fields are those nn::GptBlock fills.
//   On one rank, which of the block's tensors are whole, and which only one rank's share of a sum?
absl::StatusOr<Tensor> TensorParallelBlock::Forward(const Tensor& x, nn::BlockCache* cache) {
  return Unimplemented("composition", "B", "TensorParallelBlock::Forward");
}

// TODO(composition stage B): TensorParallelBlock::Backward -- contract: tp_block.h (Backward); idea:
//   notes/07-composition.md §2. Reads only `cache`. Tools: Linear::BackwardInput / BackwardWeight,
//   nn::CausalAttentionBackward, tensor::GeluBackward, tensor::SumRowsInto with Parameter::GradAccumulated,
//   Lab 4's FBackward, BlockCache::Release.
//   Which gradients does a rank compute in full, and which only as its share?
absl::StatusOr<Tensor> TensorParallelBlock::Backward(const Tensor& dy, nn::BlockCache* cache) {
  return Unimplemented("composition", "B", "TensorParallelBlock::Backward");
}

// TODO(composition stage B): Parameters -- contract: tp_block.h (Parameters: the order, local shapes).
std::vector<nn::Parameter*> TensorParallelBlock::Parameters() {
  throw NotImplementedError("composition", "B", "TensorParallelBlock::Parameters");
}

// TODO(composition stage B): ParameterNames and local_heads -- contract: tp_block.h.
std::vector<std::string> TensorParallelBlock::ParameterNames() const {
  throw NotImplementedError("composition", "B", "TensorParallelBlock::ParameterNames");
}
int TensorParallelBlock::local_heads() const {
  throw NotImplementedError("composition", "B", "TensorParallelBlock::local_heads");
}

}  // namespace distlab::composition
