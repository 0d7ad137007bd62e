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

// TODO(composition stage F): SequenceShard
//  1. full must be [N, h] with N % seq == 0, seq % t == 0 and 0 <= rank < t, else InvalidArgument naming the
//     numbers ("sequence length 8 is not divisible by 3 tp ranks").
//  2. Shard row b (s/t) + j is full row b s + rank (s/t) + j: positions [rank s/t, (rank+1) s/t) of every
//     sequence, sequence by sequence.
absl::StatusOr<Tensor> SequenceShard(const Tensor& full, int64_t seq, int rank, int t) {
  return Unimplemented("composition", "F", "SequenceShard");
}

// TODO(composition stage F): GatherSequence
//  One tp.AllGather of the shard's N h / t floats into a buffer [N, h] that is rank-major (rank r's shard in
//  its rows [r N/t, (r+1) N/t)), then every row copied to its place in the sequence-major result (the map of
//  SequenceShard). Check the shapes as SequenceShard does. Collectives run on `stream`: stream.Synchronize()
//  before you read the buffer. When t == 1 there is nothing to move: no call at all.
absl::StatusOr<Tensor> GatherSequence(comm::Comm& tp, comm::Stream& stream, const Tensor& shard,
                                      int64_t seq) {
  return Unimplemented("composition", "F", "GatherSequence");
}

// TODO(composition stage F): ReduceScatterSequence
//  The inverse order first: rank r's rows of `partial` (by SequenceShard's map) into chunk r of a rank-major
//  buffer; then one tp.ReduceScatter (sum) of N h / t floats per rank into the result [N / t, h], and
//  stream.Synchronize(). No call when t == 1.
absl::StatusOr<Tensor> ReduceScatterSequence(comm::Comm& tp, comm::Stream& stream, const Tensor& partial,
                                             int64_t seq) {
  return Unimplemented("composition", "F", "ReduceScatterSequence");
}

// Your block's state: what stage B's holds (the tp comm and stream, seq, local heads, names, the two norms,
// the column shards q, k, v, fc1, the row shards o, fc2, the two replicated biases).
struct SequenceParallelBlock::Impl {};

SequenceParallelBlock::SequenceParallelBlock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SequenceParallelBlock::~SequenceParallelBlock() = default;

// TODO(composition stage F): SequenceParallelBlock::Create
//  Stage B's Create, with one more check: seq % t != 0 is InvalidArgument "sequence length 8 is not
//  divisible by 3 tp ranks".
absl::StatusOr<std::unique_ptr<SequenceParallelBlock>> SequenceParallelBlock::Create(
    comm::Comm& tp, comm::Stream& stream, const nn::GptBlock& dense) {
  return Unimplemented("composition", "F", "SequenceParallelBlock::Create");
}

// TODO(composition stage F): SequenceParallelBlock::Forward
//  On the shard: cache.u = LN1(x_s) (keep the SHARD in the cache); GatherSequence it for q, k, v; attention
//  on the local heads; o's partial sums go through ReduceScatterSequence (not an all-reduce); then + o.bias
//  (MarkUsed it) and + x_s. The same for the MLP around fc1 and fc2. Exactly 2 gathers and 2 reduce-scatters.
absl::StatusOr<Tensor> SequenceParallelBlock::Forward(const Tensor& x_s, nn::BlockCache* cache) {
  return Unimplemented("composition", "F", "SequenceParallelBlock::Forward");
}

// TODO(composition stage F): SequenceParallelBlock::Backward
//  Reverse order, from the cache only. A bias's gradient += the sum of its shard's rows (partial: your tokens
//  only). Before a row-parallel layer's backward, gather its output gradient (the RS's backward). Gather the
//  cached LN output again for the column layers' weight gradients. Their input gradients are partial sums:
//  ReduceScatterSequence them (the AG's backward) before the LN backward. 4 gathers, 2 reduce-scatters.
absl::StatusOr<Tensor> SequenceParallelBlock::Backward(const Tensor& dy_s, nn::BlockCache* cache) {
  return Unimplemented("composition", "F", "SequenceParallelBlock::Backward");
}

// TODO(composition stage F): AllReduceSequenceParallelGrads
//  ln1.gamma, ln1.beta, o.bias, ln2.gamma, ln2.beta, fc2.bias: copy their gradients into one buffer of 6h
//  floats, one tp.AllReduce (sum), copy back. Nothing when t == 1.
absl::Status SequenceParallelBlock::AllReduceSequenceParallelGrads() {
  return Unimplemented("composition", "F", "SequenceParallelBlock::AllReduceSequenceParallelGrads");
}

// TODO(composition stage F): Parameters and ParameterNames, as stage B's.
std::vector<nn::Parameter*> SequenceParallelBlock::Parameters() {
  throw NotImplementedError("composition", "F", "SequenceParallelBlock::Parameters");
}
std::vector<std::string> SequenceParallelBlock::ParameterNames() const {
  throw NotImplementedError("composition", "F", "SequenceParallelBlock::ParameterNames");
}

}  // namespace distlab::composition
