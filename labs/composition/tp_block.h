// Lab 7 (composition), stage B: a whole GPT block, tensor-parallel over the t ranks of a tp communicator
// (Megatron-LM): the interface of tp_block.cc. Read notes/07-composition.md section 2.
//
//   x -> LN1 -> f -> q, k, v (column-parallel) -> CausalAttention on the a/t local heads -> o (row-parallel)
//     -> g -> + o.bias -> + x  = x1
//   x1 -> LN2 -> f -> fc1 (column-parallel) -> GELU -> fc2 (row-parallel) -> g -> + fc2.bias -> + x1  = y
//
// f: identity forward, all-reduce (sum) of the input gradient backward; g: all-reduce (sum) forward,
// identity backward -- Lab 4's FBackward and GForward (labs/parallel/tensor_parallel.h), which this block
// calls, as it shards with Lab 4's ColumnShard and RowShard.
//
// Sharding (rank r of t; a = heads, d = h / a, f = MLP inner size):
//   q, k, v    weight rows and bias entries [r h/t, (r+1) h/t): the heads [r a/t, (r+1) a/t) (ColumnShard)
//   o.weight   columns [r h/t, (r+1) h/t) (RowShard)          fc1  rows [r f/t, (r+1) f/t) and bias
//   (ColumnShard) fc2.weight columns [r f/t, (r+1) f/t) (RowShard) replicated ln1, ln2 (gamma, beta), o.bias,
//   fc2.bias: their inputs and output gradients are the same on
//              every tp rank, so are their gradients -- they need no communication at all.
// Tensor parallelism splits heads, never a head: every rank runs CausalAttention with its a/t local heads of
// width d = h / a (the softmax scale stays 1 / sqrt(d)).
//
// Communication per block and micro-batch: exactly 2 all-reduces of N h floats forward (the two g's) and 2
// backward (the two f's), on the tp communicator, nothing else; none at all when t == 1.
// Activations: a micro-batch's BlockCache holds the rank's shard, cache.bytes() == nn::BlockCacheBytes(cfg,
// N, t).
#ifndef DISTLAB_LABS_COMPOSITION_TP_BLOCK_H_
#define DISTLAB_LABS_COMPOSITION_TP_BLOCK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"
#include "reference/nn/transformer.h"

namespace distlab::composition {

class TensorParallelBlock {
 public:
  // Shards `dense` for tp.rank() of tp.size() (the block keeps no reference to `dense`). InvalidArgument
  // naming the numbers when heads % t or inner % t is not 0 ("8 heads are not divisible by 3 tp ranks").
  static absl::StatusOr<std::unique_ptr<TensorParallelBlock>> Create(comm::Comm& tp, comm::Stream& stream,
                                                                     const nn::GptBlock& dense);
  ~TensorParallelBlock();

  // x [N, h], the same on every tp rank -> y [N, h], the same on every tp rank (equal to dense.Forward(x)
  // up to summation order). `cache` keeps this micro-batch's activations (several may be in flight).
  absl::StatusOr<tensor::Tensor> Forward(const tensor::Tensor& x, nn::BlockCache* cache);
  // dy [N, h] (the same on every tp rank) -> dx [N, h]; accumulates the local gradients; releases `cache`.
  absl::StatusOr<tensor::Tensor> Backward(const tensor::Tensor& dy, nn::BlockCache* cache);

  // In nn::GptBlock order with local shapes: ln1.gamma ln1.beta q.w q.b k.w k.b v.w v.b o.w o.b ln2.gamma
  // ln2.beta fc1.w fc1.b fc2.w fc2.b.
  std::vector<nn::Parameter*> Parameters();
  // nn::GptBlock's names for them, in the same order ("blocks.2.attn.q.weight", ...).
  std::vector<std::string> ParameterNames() const;
  int local_heads() const;

  struct Impl;

 private:
  explicit TensorParallelBlock(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::composition

#endif  // DISTLAB_LABS_COMPOSITION_TP_BLOCK_H_
