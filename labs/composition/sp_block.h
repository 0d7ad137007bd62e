// Lab 7 (composition), stage F (stretch): sequence parallelism on the block of stage B (Korthikanti et al.
// 2022, "Reducing Activation Recomputation in Large Transformer Models"; Megatron-LM's --sequence-parallel):
// the interface of sp_block.cc. Read notes/07-composition.md section 7.
//
// Under stage B's tensor parallelism the two LayerNorms and the residual adds run on the whole [N, h] on
// every tp rank: their activations are stored t times. Sequence parallelism runs them on this rank's tokens
// only (the sequence-parallel region) and keeps the tensor-parallel regions of stage B (q, k, v, attention,
// o; fc1, GELU, fc2) on whole sequences; each f / g pair becomes an all-gather and a reduce-scatter along the
// sequence (AG, RS below). The weights are sharded exactly as in tp_block.h.
//
// The sequence shard (a convention the tests pin): with B = N / s sequences of s tokens in the rows
// sequence-major (reference/nn/transformer.h), rank r of t holds positions [r s/t, (r+1) s/t) of every
// sequence, sequence by sequence: shard row b (s/t) + j is full row b s + r (s/t) + j. Megatron keeps
// activations as [s, b, h] and shards the first dimension, which is the same set of tokens per rank; with
// our row order those tokens are not contiguous, so gathering and scattering reorder rows.
//
// Communication per block and micro-batch, on the tp communicator, nothing else (a test counts each kind):
//   forward:  2 all-gathers and 2 reduce-scatters, each of S = N h floats (the whole array);
//   backward: 4 all-gathers and 2 reduce-scatters of S each (the cache keeps only shards, as Megatron's
//             does, so what backward needs whole it gathers again).
// None at all when t == 1. Per step, AllReduceSequenceParallelGrads adds one all-reduce of 6h floats.
// Activations: a micro-batch's nn::BlockCache holds only shards, every field of it divided by t:
// cache.bytes() == SequenceParallelCacheBytes(cfg, N, t) below; in particular u and u2 (the norms' outputs)
// and the norms' caches ln1 and ln2 (xhat, rstd) have N / t rows.
#ifndef DISTLAB_LABS_COMPOSITION_SP_BLOCK_H_
#define DISTLAB_LABS_COMPOSITION_SP_BLOCK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"
#include "reference/nn/transformer.h"

namespace distlab::composition {

// Rank `rank` of `t`'s sequence shard of full [N, h] (N = B s): [N / t, h], the rows named above. No
// communication (the tests use it to give each rank its input). InvalidArgument naming the numbers when N % s
// or s % t is not 0.
absl::StatusOr<tensor::Tensor> SequenceShard(const tensor::Tensor& full, int64_t seq, int rank, int t);

// AG forward: every rank's shard [N / t, h] -> the full [N, h] in sequence-major rows, the same on every
// rank: one all-gather (S = N h floats), nothing else; no call when t == 1. InvalidArgument naming the
// numbers, before any communication, when the t shards are not whole sequences (t rows % s != 0, e.g. 3
// rows on each of 3 ranks with s = 10: "9 rows are not whole sequences of 10 tokens") or s % t != 0.
absl::StatusOr<tensor::Tensor> GatherSequence(comm::Comm& tp, comm::Stream& stream,
                                              const tensor::Tensor& shard, int64_t seq);
// RS forward: every rank's partial [N, h] -> this rank's shard [N / t, h] of their sum: one reduce-scatter
// (sum, S = N h floats), nothing else; no call when t == 1. InvalidArgument as GatherSequence's when N % s
// or s % t is not 0.
absl::StatusOr<tensor::Tensor> ReduceScatterSequence(comm::Comm& tp, comm::Stream& stream,
                                                     const tensor::Tensor& partial, int64_t seq);

// Bytes of one micro-batch's cache of N rows under tensor and sequence parallelism (f32):
//   4 (N / t) [(4h + 2) + (4h + 2f + a s)]
// -- stage B's formula (nn::BlockCacheBytes) with its replicated part, the norm caches and the norm outputs
// now held as shards, divided by t as well.
inline size_t SequenceParallelCacheBytes(const nn::GptConfig& cfg, int64_t rows, int tp) {
  const int64_t n = rows / tp;
  return static_cast<size_t>(4 * n *
                             ((4 * cfg.hidden + 2) + (4 * cfg.hidden + 2 * cfg.inner + cfg.heads * cfg.seq)));
}

class SequenceParallelBlock {
 public:
  // Shards `dense` for tp.rank() of tp.size() as TensorParallelBlock does. InvalidArgument naming the
  // numbers when heads % t, inner % t or seq % t is not 0 ("sequence length 8 is not divisible by 3 tp
  // ranks").
  static absl::StatusOr<std::unique_ptr<SequenceParallelBlock>> Create(comm::Comm& tp, comm::Stream& stream,
                                                                       const nn::GptBlock& dense);
  ~SequenceParallelBlock();

  // x_s [N / t, h], this rank's sequence shard -> y_s [N / t, h], this rank's shard of dense.Forward(x) (up
  // to summation order). `cache` keeps this micro-batch's shards (several may be in flight).
  absl::StatusOr<tensor::Tensor> Forward(const tensor::Tensor& x_s, nn::BlockCache* cache);
  // dy_s [N / t, h] -> dx_s [N / t, h]; accumulates the local gradients; releases `cache`. The gradients of
  // the parameters a rank holds whole are then partial wherever only this rank's tokens reached them.
  absl::StatusOr<tensor::Tensor> Backward(const tensor::Tensor& dy_s, nn::BlockCache* cache);
  // Completes those partial gradients over tp in one all-reduce of 6h floats (Megatron's
  // finalize_model_grads does the same for the parameters it marks sequence_parallel). Once per step, after
  // the last micro-batch's Backward: every gradient then equals its part of the dense block's on every rank.
  absl::Status AllReduceSequenceParallelGrads();

  // As TensorParallelBlock's: nn::GptBlock order with local shapes, and nn::GptBlock's names.
  std::vector<nn::Parameter*> Parameters();
  std::vector<std::string> ParameterNames() const;

  struct Impl;

 private:
  explicit SequenceParallelBlock(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::composition

#endif  // DISTLAB_LABS_COMPOSITION_SP_BLOCK_H_
