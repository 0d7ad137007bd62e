// Lab 4 (parallel), stage D: memory and communication accounting at scale (the formulas of the ZeRO paper, of
// Korthikanti et al. "Reducing Activation Recomputation in Large Transformer Models", and of the
// Ultra-Scale Playbook), for a decoder-only transformer.
//
// Vocabulary: L = layers, h = hidden, a = attention heads, k = key/value heads, f = MLP inner size,
// V = vocabulary, s = sequence length, b = micro-batch size, Psi = parameters, t/p/d = tensor/pipeline/
// data-parallel degrees, n = ranks a state is sharded over.
//
// Byte model (mixed precision with an fp32 master copy): per parameter 2 (bf16 weights) + 2 (bf16
// gradients) + 12 (fp32 master, Adam m, Adam v) = 16 bytes; fp32 training (no master copy): 4 + 4 + 8.
// ZeRO (Rajbhandari et al.) shards over the d data-parallel ranks: stage 1 the optimizer state, stage 2 the
// gradients too, stage 3 the weights too; stage 0 (plain DDP) shards nothing.
// Activations per layer without recomputation: s b h (34 + 5 a s / h) bytes -- Korthikanti et al.'s GPT
// block (bf16, LayerNorm, GELU MLP of 4h, dropout, the attention scores stored; the 5 a s / h term is the
// scores, softmax and dropout); selective recomputation keeps 34 s b h; full keeps the layer input only,
// 2 s b h. For a Llama-style block (no dropout, FlashAttention, GQA, SwiGLU) the GPT formula is an upper
// bound: notes/04-parallel.md derives s b h (12 + 4 k/a + 6 f/h) + 4 a s b instead. With tensor + sequence
// parallelism of degree t every term divides by t. With 1F1B pipelining over p stages the first stage holds
// p micro-batches of L/p layers: L layers' worth.
// All arithmetic is real (double), never integer division: Psi / (t p) is not rounded to whole parameters,
// and 5 a s / h at s = 1000, a = 32, h = 4096 is 39.0625, not 39.
// Left out: embedding/logit activations, temporary buffers, fragmentation.
//
// Critical batch size (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training"): the gradient
// noise scale B_simple = tr(Sigma) / |G|^2, with G the true gradient and Sigma the per-example gradient
// covariance, estimated from per-example gradients (see GradientNoiseScale).
#ifndef DISTLAB_LABS_PARALLEL_MEMORY_MODEL_H_
#define DISTLAB_LABS_PARALLEL_MEMORY_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::parallel {

struct TransformerShape {
  int64_t layers = 32;
  int64_t hidden = 4096;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t ffn = 14336;
  int64_t vocab = 128256;
  bool gated_mlp = true;  // SwiGLU: three h x f matrices; otherwise two
  bool tied_embeddings = false;
};

enum class Recompute { kNone, kSelective, kFull };

struct Parallelism {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;  // 0..3, over the dp ranks
  bool mixed_precision = true;
};

struct ModelStateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

struct MemoryBreakdown {
  ModelStateBytes states;
  double activations = 0;
  double total() const { return states.total() + activations; }
};

// Psi: embeddings (and an untied output head, V h each), per layer the attention projections
// q, o (h x h each) and k, v (h x h k / a each), the MLP (3 or 2 matrices of h x f) and two norms (h each);
// one final norm (h). No biases.
int64_t ParameterCount(const TransformerShape& shape);

// Model-state bytes per rank for psi parameters sharded by ZeRO `stage` over n ranks (see the byte model).
ModelStateBytes ZeroModelStates(double psi, int n, int stage, bool mixed_precision);

// Activation bytes of one layer for one micro-batch: s b h (34 + 5 a s / h), 34 s b h, or 2 s b h, / t.
double ActivationBytesPerLayer(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, int tp);

// Per-rank memory on the first pipeline stage: states of Psi / (t p) parameters sharded over dp, and
// L layers' activations (1F1B keeps p micro-batches of L/p layers).
MemoryBreakdown EstimateMemory(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, const Parallelism& par);

// Elements each rank sends per step with ring collectives, for psi parameters over n data-parallel ranks,
// under DDP (stage 0) or ZeRO stage 1-3 as this lab's ZeroTrainer communicates (zero.h: one reduce-scatter
// and one all-gather per step for stages 1 and 2, two all-gathers and one reduce-scatter for stage 3; DDP
// all-reduces). No padding: psi is a real number.
double CommElementsPerRank(double psi, int n, int stage);

struct NoiseScale {
  double trace_sigma = 0;   // T, the estimate of tr(Sigma)
  double grad_norm_sq = 0;  // S, the estimate of |G|^2
  double b_simple = 0;      // T / S
};

// The gradient noise scale from m >= 2 per-example gradients g_1..g_m (each of the same length P > 0),
// with unbiased estimators (accumulate in double):
//   mean        G^ = (1/m) sum_i g_i
//   tr(Sigma)   T  = sum_i |g_i - G^|^2 / (m - 1)     (the sample variance, summed over coordinates)
//   |G|^2       S, an unbiased estimate of |G|^2 built from |G^|^2 and T (E S = |G|^2; notes/04 §6)
//   B_simple    T / S
// InvalidArgument for m < 2, P = 0 or unequal lengths; FailedPrecondition when S <= 0 (m examples cannot
// resolve the gradient from its noise: take more).
absl::StatusOr<NoiseScale> GradientNoiseScale(const std::vector<std::vector<float>>& per_example);

}  // namespace distlab::parallel

#endif  // DISTLAB_LABS_PARALLEL_MEMORY_MODEL_H_
