// The small GPT of the capstone (Lab 7): LayerNorm, causal multi-head self-attention and a pre-norm block,
// each with an explicit backward, and a GPT made of an embedding, L blocks and a head.
//
// Vocabulary: B = sequences of a micro-batch, s = sequence length, N = B s rows, sequence-major (row r is
// token r % s of sequence r / s), h = hidden, a = heads, d = h / a (head width), f = MLP inner size,
// V = vocabulary, L = blocks, t = tensor-parallel ranks (the block cache formula below counts their shards).
//
// Every forward takes an explicit cache and every backward reads only that cache, so a pipeline stage can
// keep several micro-batches in flight through the same layers; caches are MemCategory::kActivations.
// Backward adds into Parameter::grad (gradient accumulation) and releases the cache it consumed. Weights are
// drawn from SeedFor(seed, name), so any rank can build any piece of the model with the values the dense
// model has (a pipeline stage builds only its blocks).
//
// Left out: dropout, rotary embeddings, grouped-query attention, fused kernels, mixed precision.
#ifndef DISTLAB_REFERENCE_NN_TRANSFORMER_H_
#define DISTLAB_REFERENCE_NN_TRANSFORMER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference/nn/layers.h"
#include "reference/nn/model.h"
#include "reference/nn/parameter.h"
#include "reference/tensor/tensor.h"

namespace distlab::nn {

struct GptConfig {
  int64_t vocab = 32;
  int64_t hidden = 32;  // h
  int64_t heads = 8;    // a (h % a == 0)
  int64_t inner = 128;  // f
  int64_t seq = 8;      // s
  int layers = 4;       // L
  bool tie_embeddings = false;
  float ln_eps = 1e-5f;
  uint64_t seed = 1;
};

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension (biased variance);
// gamma = 1, beta = 0 at initialization. Parameters "<name>.gamma", "<name>.beta" [h].
class LayerNorm {
 public:
  struct Cache {
    Tensor xhat;  // [N, h]  (x - mean) * rstd
    Tensor rstd;  // [N]     1 / sqrt(var + eps)
    size_t bytes() const { return xhat.bytes() + rstd.bytes(); }
    void Release();
  };
  LayerNorm(std::string name, int64_t hidden, float eps);
  // x [N, h] -> y [N, h]. `cache` may be null (evaluation: nothing is kept). Every forward marks one use of
  // each parameter (parameter.h: a forward without backward leaves it pending until ZeroGrad).
  Tensor Forward(const Tensor& x, Cache* cache);
  // With dxhat = dy gamma:  dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))  (means over the row);
  // dgamma += sum_rows dy xhat, dbeta += sum_rows dy. Releases the cache.
  Tensor Backward(const Tensor& dy, Cache* cache);
  std::vector<Parameter*> Parameters() { return {&gamma_, &beta_}; }
  Parameter& gamma() { return gamma_; }
  Parameter& beta() { return beta_; }
  const Parameter& gamma() const { return gamma_; }
  const Parameter& beta() const { return beta_; }

 private:
  int64_t hidden_;
  float eps_;
  Parameter gamma_, beta_;
};

// The attention core on `heads` heads: head j reads columns [j d, (j+1) d) of q, k, v, d = q.dim(1) / heads.
// For every sequence and head: S = Q K^T / sqrt(d), entries above the diagonal masked (a token sees itself
// and the tokens before it), P = softmax(S) row by row, ctx = P V.  q, k, v [N, heads d] with N % seq == 0;
// returns ctx [N, heads d]; `probs` (may be null) receives P as [N / seq, heads, seq, seq].
Tensor CausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, int64_t seq,
                       Tensor* probs);
// dV = P^T dctx;  dP = dctx V^T;  dS = P * (dP - rowsum(dP * P));  dQ = dS K / sqrt(d);  dK = dS^T Q /
// sqrt(d).
void CausalAttentionBackward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                             const Tensor& dctx, int64_t heads, int64_t seq, Tensor* dq, Tensor* dk,
                             Tensor* dv);

// One micro-batch's activations of one block. Under tensor parallelism the same struct holds a rank's share:
// h_l = h / t, a_l = a / t, f_l = f / t for the tensors marked "local".
struct BlockCache {
  LayerNorm::Cache ln1;  // [N, h] + [N]
  Tensor u;              // LN1 output, the input of q, k, v   [N, h]
  Tensor q, k, v;        // local                              [N, h_l] each
  Tensor ctx;            // attention output, input of o       [N, h_l]
  Tensor probs;          // local                              [N / s, a_l, s, s]
  LayerNorm::Cache ln2;  // [N, h] + [N]
  Tensor u2;             // LN2 output, the input of fc1       [N, h]
  Tensor z;              // fc1 output before GELU (local)     [N, f_l]
  Tensor g;              // GELU output, the input of fc2      [N, f_l]
  size_t bytes() const;
  void Release();
};
// The bytes a BlockCache of N rows holds (f32):  4 N [(4h + 2) + (4h + 2f + a s) / t]
// (the replicated part: two norm caches and two norm outputs; the sharded part: q, k, v, ctx, P, z, g).
size_t BlockCacheBytes(const GptConfig& cfg, int64_t rows, int tp = 1);

// A pre-norm transformer block:  x1 = x + o(Attention(q(u), k(u), v(u))), u = LN1(x);
//                                y  = x1 + fc2(GELU(fc1(u2))),            u2 = LN2(x1).
class GptBlock {
 public:
  GptBlock(std::string name, const GptConfig& cfg);  // name "blocks.<l>"
  // x [N, h] -> y [N, h]. `cache` may be null (evaluation).
  Tensor Forward(const Tensor& x, BlockCache* cache);
  // dy [N, h] -> dx [N, h]; accumulates every parameter's gradient; releases the cache.
  Tensor Backward(const Tensor& dy, BlockCache* cache);
  // ln1.gamma ln1.beta attn.q.weight attn.q.bias attn.k.weight attn.k.bias attn.v.weight attn.v.bias
  // attn.o.weight attn.o.bias ln2.gamma ln2.beta mlp.fc1.weight mlp.fc1.bias mlp.fc2.weight mlp.fc2.bias
  // (each name prefixed with "<block name>.").
  std::vector<Parameter*> Parameters();
  std::vector<std::string> ParameterNames() const;
  const GptConfig& config() const { return cfg_; }
  const std::string& name() const { return name_; }
  LayerNorm& ln1() { return ln1_; }
  LayerNorm& ln2() { return ln2_; }
  Linear& q() { return q_; }
  Linear& k() { return k_; }
  Linear& v() { return v_; }
  Linear& o() { return o_; }
  Linear& fc1() { return fc1_; }
  Linear& fc2() { return fc2_; }
  const LayerNorm& ln1() const { return ln1_; }
  const LayerNorm& ln2() const { return ln2_; }
  const Linear& q() const { return q_; }
  const Linear& k() const { return k_; }
  const Linear& v() const { return v_; }
  const Linear& o() const { return o_; }
  const Linear& fc1() const { return fc1_; }
  const Linear& fc2() const { return fc2_; }

 private:
  std::string name_;
  GptConfig cfg_;
  LayerNorm ln1_;
  Linear q_, k_, v_, o_;
  LayerNorm ln2_;
  Linear fc1_, fc2_;
};

// Token and position embeddings: x[r] = wte[ids[r]] + wpe[r % s]. Parameters "wte.weight" [V, h],
// "wpe.weight" [s, h]. Keeps no activation: its backward needs only the ids.
class GptEmbedding {
 public:
  explicit GptEmbedding(const GptConfig& cfg);
  // ids: N tokens, N % s == 0 (aborts otherwise, naming N and s).
  Tensor Forward(const std::vector<int32_t>& ids);
  void Backward(const std::vector<int32_t>& ids, const Tensor& dx);
  std::vector<Parameter*> Parameters() { return {&wte_.weight(), &wpe_}; }
  Embedding& wte() { return wte_; }
  Parameter& wpe() { return wpe_; }

 private:
  GptConfig cfg_;
  Embedding wte_;
  Parameter wpe_;
};

// The final norm, the output projection and the loss of one micro-batch.
struct HeadCache {
  LayerNorm::Cache lnf;          // [N, h] + [N]
  Tensor xf;                     // LN_f output, the input of the projection  [N, h]
  Tensor probs;                  // softmax of the logits                     [N, V]
  std::vector<int32_t> targets;  // N
  size_t bytes() const { return lnf.bytes() + xf.bytes() + probs.bytes(); }  // 4 N (2h + 1 + V)
  void Release();
};

// logits = LN_f(x) W^T, loss = mean over the N rows of the cross-entropy. W is "head.weight" [V, h] (owned)
// or, with tied embeddings, a weight passed in (wte's, or a copy of it on a pipeline's last stage).
// Parameters "lnf.gamma", "lnf.beta" and, untied, "head.weight".
class GptHead {
 public:
  GptHead(const GptConfig& cfg, Parameter* tied_weight);  // tied_weight null: an own head.weight
  float Forward(const Tensor& x, const std::vector<int32_t>& targets, HeadCache* cache);
  // dlogits = loss_scale (P - onehot) / N; accumulates lnf's and W's gradients; returns dx; releases the
  // cache.
  Tensor Backward(HeadCache* cache, float loss_scale);
  std::vector<Parameter*> Parameters();  // lnf.gamma, lnf.beta, head.weight (untied only)
  LayerNorm& lnf() { return lnf_; }
  Parameter& projection() { return *proj_; }

 private:
  GptConfig cfg_;
  LayerNorm lnf_;
  std::unique_ptr<Parameter> own_;
  Parameter* proj_;
};

// ids -> GptEmbedding -> L GptBlocks -> GptHead -> mean cross-entropy. The dense single-rank reference.
class Gpt {
 public:
  explicit Gpt(const GptConfig& cfg);
  // Mean loss over the batch's N = B s tokens; keeps the caches for Backward.
  float Forward(const Batch& batch);
  // Gradients of loss_scale * loss, accumulated; releases the caches.
  void Backward(float loss_scale = 1.f);
  // Order: wte.weight, wpe.weight, blocks 0..L-1 (GptBlock order), lnf.gamma, lnf.beta, head.weight (untied).
  std::vector<Parameter*> Parameters();
  void ZeroGrad() { ZeroGrads(Parameters()); }
  const GptConfig& config() const { return cfg_; }
  GptEmbedding& embedding() { return embedding_; }
  GptBlock& block(int l) { return *blocks_[l]; }
  GptHead& head() { return *head_; }

 private:
  GptConfig cfg_;
  GptEmbedding embedding_;
  std::vector<std::unique_ptr<GptBlock>> blocks_;
  std::unique_ptr<GptHead> head_;
  std::vector<int32_t> ids_;
  std::vector<BlockCache> caches_;
  HeadCache head_cache_;
};

// Parameters per block on one of t tensor-parallel ranks:  6h + (4h^2 + 3h + 2hf + f) / t
// (replicated: two norms and the o and fc2 biases; sharded: q, k, v with biases, o.weight, fc1, fc2.weight).
int64_t BlockParameters(const GptConfig& cfg, int tp = 1);
// All parameters:  V h + s h + L BlockParameters + 2h + (tied ? 0 : V h).
int64_t GptParameters(const GptConfig& cfg);

// A learnable sequence task in which attention matters: x_0 uniform in [0, V), x_1 = (3 x_0 + 1) mod V,
// x_{j+1} = (x_j + 2 x_{j-1} + 1) mod V; ids = x_0 .. x_{s-1}, targets = x_1 .. x_s (each target needs the
// token and the one before it). Global batch `step` of `count` sequences (N = count s rows); a rank that
// takes sequences [b, e) uses Slice(batch, b s, e s).
Batch SyntheticSequences(int64_t vocab, int64_t seq, uint64_t seed, int64_t step, int64_t count);

}  // namespace distlab::nn

#endif  // DISTLAB_REFERENCE_NN_TRANSFORMER_H_
