// Lab 7 (composition), stage B: a whole GPT block, tensor-parallel over the t ranks of a tp communicator
// (Megatron-LM; Shoeybi et al. 2019): the interface of tp_block.cc. Read notes/07-composition.md section 2.
//
// The block computes what nn::GptBlock computes (reference/nn/transformer.h):
//   u = LN1(x),  x1 = x + o(Attention(q(u), k(u), v(u))),  u2 = LN2(x1),  y = x1 + fc2(GELU(fc1(u2)))
// with every matrix sharded over tp by Lab 4's ColumnShard and RowShard, and Lab 4's conjugate operators
// (labs/parallel/tensor_parallel.h: GForward, FBackward) as its only communication.
//
// Shard map (rank r of t; h hidden, f = MLP inner size; a test reads every parameter):
//   column-parallel (ColumnShard)  q, k, v     weight rows and bias entries [r h/t, (r+1) h/t)
//                                  fc1         weight rows and bias entries [r f/t, (r+1) f/t)
//   row-parallel (RowShard)        o.weight    columns [r h/t, (r+1) h/t)
//                                  fc2.weight  columns [r f/t, (r+1) f/t)
//   whole on every rank            ln1 and ln2 (gamma, beta), o.bias, fc2.bias
//
// What the tests observe, per block and micro-batch, on the tp communicator: exactly 2 all-reduces (sum) of
// N h floats in Forward and 2 in Backward, nothing else (no other collective, no Send or Recv); none at all
// when t == 1. Activations: Forward fills `cache` with this rank's part, cache->bytes() ==
// nn::BlockCacheBytes(cfg, N, t), and keeps nothing else: right after it returns, what it allocated and is
// still alive in MemCategory::kActivations is exactly cache->bytes() + y.bytes() (temporaries freed, nothing
// kept in the layers). Backward releases the cache (cache->bytes() == 0 after it).
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
  // up to summation order). `cache` keeps this micro-batch's activations (several may be in flight, each
  // with its own cache).
  absl::StatusOr<tensor::Tensor> Forward(const tensor::Tensor& x, nn::BlockCache* cache);
  // dy [N, h] (the same on every tp rank) -> dx [N, h], the same on every tp rank (dense.Backward's); adds
  // to every local parameter's grad its part of the dense gradient (by the shard map); releases `cache`.
  absl::StatusOr<tensor::Tensor> Backward(const tensor::Tensor& dy, nn::BlockCache* cache);

  // In nn::GptBlock order with local shapes: ln1.gamma ln1.beta q.w q.b k.w k.b v.w v.b o.w o.b ln2.gamma
  // ln2.beta fc1.w fc1.b fc2.w fc2.b.
  std::vector<nn::Parameter*> Parameters();
  // nn::GptBlock's names for them, in the same order ("blocks.2.attn.q.weight", ...).
  std::vector<std::string> ParameterNames() const;
  // The attention heads this rank's q, k, v shards hold.
  int local_heads() const;

  struct Impl;

 private:
  explicit TensorParallelBlock(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::composition

#endif  // DISTLAB_LABS_COMPOSITION_TP_BLOCK_H_
