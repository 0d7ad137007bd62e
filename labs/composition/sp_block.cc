// Lab 7 (composition), stage F (stretch): sequence parallelism -- your implementation.
//
// Read labs/composition/sp_block.h and notes/07-composition.md section 7. Stage B's block is your model: the
// same shards (Lab 4's ColumnShard and RowShard), the same order of operations; what changes is which
// tokens a rank's norms see and which collectives join the regions.
#include "labs/composition/sp_block.h"

#include "labs/parallel/tensor_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

using tensor::Tensor;

// TODO(composition stage F): SequenceShard -- contract: sp_block.h (the sequence shard, SequenceShard);
//   idea: notes/07-composition.md §7. No communication.
absl::StatusOr<Tensor> SequenceShard(const Tensor& full, int64_t seq, int rank, int t) {
  return Unimplemented("composition", "F", "SequenceShard");
}

// TODO(composition stage F): GatherSequence -- contract: sp_block.h (GatherSequence); idea:
//   notes/07-composition.md §7. Tools: tp.AllGather (comm.h: rank r's part lands at offset r count) on
//   `stream`, Synchronize before you read; a kCommBuffers tensor for the collective's buffer.
//   The collective's buffer is rank-major, the result sequence-major: where does each row go?
absl::StatusOr<Tensor> GatherSequence(comm::Comm& tp, comm::Stream& stream, const Tensor& shard,
                                      int64_t seq) {
  return Unimplemented("composition", "F", "GatherSequence");
}

// TODO(composition stage F): ReduceScatterSequence -- contract: sp_block.h (ReduceScatterSequence); idea:
//   notes/07-composition.md §7. Tools: tp.ReduceScatter (rank r receives the sum of every rank's r-th
//   chunk) on `stream`, Synchronize before you read.
absl::StatusOr<Tensor> ReduceScatterSequence(comm::Comm& tp, comm::Stream& stream, const Tensor& partial,
                                             int64_t seq) {
  return Unimplemented("composition", "F", "ReduceScatterSequence");
}

// Your block's state. A micro-batch's activations belong in its BlockCache, never here.
struct SequenceParallelBlock::Impl {};

SequenceParallelBlock::SequenceParallelBlock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SequenceParallelBlock::~SequenceParallelBlock() = default;

// TODO(composition stage F): SequenceParallelBlock::Create -- contract: sp_block.h (Create) and tp_block.h
//   (the shard map); idea: notes/07-composition.md §7. Tools: those of stage B's Create.
absl::StatusOr<std::unique_ptr<SequenceParallelBlock>> SequenceParallelBlock::Create(
    comm::Comm& tp, comm::Stream& stream, const nn::GptBlock& dense) {
  return Unimplemented("composition", "F", "SequenceParallelBlock::Create");
}

// TODO(composition stage F): SequenceParallelBlock::Forward -- contract: sp_block.h (Forward, the
//   communication, the cache); idea: notes/07-composition.md §7. Tools: stage B's, with your GatherSequence
//   and ReduceScatterSequence in place of Lab 4's g.
//   Which of the block's operations need a whole sequence, and which only a token?
absl::StatusOr<Tensor> SequenceParallelBlock::Forward(const Tensor& x_s, nn::BlockCache* cache) {
  return Unimplemented("composition", "F", "SequenceParallelBlock::Forward");
}

// TODO(composition stage F): SequenceParallelBlock::Backward -- contract: sp_block.h (Backward, the
//   communication); idea: notes/07-composition.md §7. Reads only `cache`. Tools: stage B's, with your
//   GatherSequence and ReduceScatterSequence in place of Lab 4's f.
//   What is the backward of an all-gather, and of a reduce-scatter?
absl::StatusOr<Tensor> SequenceParallelBlock::Backward(const Tensor& dy_s, nn::BlockCache* cache) {
  return Unimplemented("composition", "F", "SequenceParallelBlock::Backward");
}

// TODO(composition stage F): AllReduceSequenceParallelGrads -- contract: sp_block.h; idea:
//   notes/07-composition.md §7. Tools: tp.AllReduce on `stream`. Which gradients did Backward leave partial?
absl::Status SequenceParallelBlock::AllReduceSequenceParallelGrads() {
  return Unimplemented("composition", "F", "SequenceParallelBlock::AllReduceSequenceParallelGrads");
}

// TODO(composition stage F): Parameters and ParameterNames -- contract: sp_block.h (as stage B's).
std::vector<nn::Parameter*> SequenceParallelBlock::Parameters() {
  throw NotImplementedError("composition", "F", "SequenceParallelBlock::Parameters");
}
std::vector<std::string> SequenceParallelBlock::ParameterNames() const {
  throw NotImplementedError("composition", "F", "SequenceParallelBlock::ParameterNames");
}

}  // namespace distlab::composition
