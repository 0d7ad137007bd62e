// Lab 6 (moe), stages A and C: the router, the single-rank MoE layer, expert capacity and token dropping.
//
// Vocabulary: T = tokens, E = experts, k = top-k, h = hidden size, f = an expert MLP's inner size.
//
//   x [T, h] --router W_r [E, h]--> logits [T, E] --softmax--> probs [T, E] --top-k--> expert [T, k],
//                                                                                      gate [T, k]
//   y[t] = x[t] + sum over kept slots j of gate[t, j] * Expert_{expert[t, j]}(x[t])      (residual included)
//
// Gates are the chosen probabilities renormalised to sum to 1 over the k chosen experts (Mixtral always;
// Qwen3-MoE, whose checkpoints set norm_topk_prob; DeepSeek-V3 renormalises too, but sigmoid scores, then
// scales them by 2.5), or, with normalize_gates = false, the raw probabilities (Switch Transformer;
// Qwen1.5-MoE / Qwen2-MoE and DeepSeek-V2, norm_topk_prob = false). Either way the gates carry the task's
// gradient into the router.
//
// Capacity (stage C): an expert accepts at most C = ceil(T / E * capacity_factor) assignments of one batch
// (the default, CapacityFormula::kTokens), or C = ceil(k T / E * capacity_factor) with
// CapacityFormula::kAssignments (GShard's and Megatron-LM's form); the two agree for k = 1. The assignments
// beyond C are dropped (see DropPolicy): a dropped slot is not a kept slot of the formula above. Without a
// capacity factor the layer is dropless.
//
// Left out: expert biases in the router, jitter noise, shared experts, token-choice vs expert-choice
// variants.
#ifndef DISTLAB_LABS_MOE_MOE_LAYER_H_
#define DISTLAB_LABS_MOE_MOE_LAYER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/nn/layers.h"
#include "reference/nn/parameter.h"
#include "reference/tensor/tensor.h"

namespace distlab::moe {

using tensor::Tensor;

// The router's decision for one batch of T tokens.
struct Routing {
  int64_t tokens = 0;           // T
  int experts = 0;              // E
  int top_k = 0;                // k
  bool normalized = true;       // gates renormalised over the chosen experts
  std::vector<float> probs;     // [T, E] softmax of the logits, row-major
  std::vector<int32_t> expert;  // [T, k] chosen experts, by descending probability (ties: lower index first)
  std::vector<float> gate;      // [T, k] combine weights of the chosen experts
  std::vector<uint8_t> kept;    // [T, k] 1, or 0 where capacity dropped the assignment
};

// ---------------------------------------------------------------------------------------------------------
// Stage A: routing and its backward.
// ---------------------------------------------------------------------------------------------------------

// softmax(logits) per row, the top-k experts, their gates. logits [T, E] f32; 1 <= k <= E.
// Errors: InvalidArgument naming the shape or k.
absl::StatusOr<Routing> Route(const Tensor& logits, int top_k, bool normalize_gates);

// dL/dlogits [T, E] from dL/dgate [T, k] (row-major, T*k values): the gradient of the gates exactly as Route
// computed them from the logits (routing.normalized says which convention). The top-k choice itself has no
// gradient. Errors: InvalidArgument when dgate does not hold T*k values.
absl::StatusOr<Tensor> RouterBackward(const Routing& routing, const std::vector<float>& dgate);

// ---------------------------------------------------------------------------------------------------------
// Stage C: capacity.
// ---------------------------------------------------------------------------------------------------------

enum class DropPolicy {
  kByProbability,  // an over-full expert keeps its highest-probability assignments (ties: earlier token)
  kByPosition,     // an over-full expert keeps the assignments of the earliest tokens
};

// What the capacity factor multiplies: the tokens' fair share T / E, or the assignments' fair share k T / E.
enum class CapacityFormula {
  kTokens,  // C = ceil(T / E * capacity_factor)      the default (Switch Transformer's, written for k = 1)
  kAssignments,  // C = ceil(k T / E * capacity_factor)    GShard, Megatron-LM: factor 1 fits a balanced top-k
};

// C by `formula`, exactly as follows. x = load * capacity_factor / E in doubles, multiplied first (load = T,
// or k T for kAssignments, as a double); C = ceil(x), except that an x no more than 1e-9 * max(1, x) above
// an integer n gives C = n. The tolerance (the lab's choice) forgives the binary error of factors like 1.1,
// which no double holds exactly:
//   T = 100, E = 10, k = 1, 1.1: x = 11.000000000000002 -> C = 11     (plain ceil would give 12)
//   T = 500, E = 10, k = 1, 1.1: x = 55 exactly            -> C = 55
//   T = 100, E = 2,  k = 1, 1.1: x = 55.00000000000001     -> C = 55
//   T = 8,   E = 4,  k = 1, 1.1: x = 2.2                   -> C = 3      (a real fraction still rounds up)
// Megatron-LM's get_capacity computes ceil((kT / E) * factor), dividing first and without a tolerance: 11,
// 56, 56 and 3 for these four -- it differs from the lab wherever a rounding error lifts x just above an
// integer. capacity_factor <= 0 means dropless and returns T (an expert can take each token at most once).
// Errors: InvalidArgument for T < 0, E < 1, k < 1 or k > E.
absl::StatusOr<int64_t> ExpertCapacity(int64_t tokens, int experts, int top_k, double capacity_factor,
                                       CapacityFormula formula = CapacityFormula::kTokens);

// Marks kept[t, j] = 0 for the assignments each expert cannot take (see DropPolicy). Gates are left as they
// are (a dropped slot's gate is simply not used). Errors: InvalidArgument for capacity < 0.
absl::Status ApplyCapacity(Routing& routing, int64_t capacity, DropPolicy policy);

// ---------------------------------------------------------------------------------------------------------
// The layer (stage A; capacity from stage C).
// ---------------------------------------------------------------------------------------------------------

struct MoeConfig {
  int64_t hidden = 0;  // h
  int64_t inner = 0;   // f of each expert MLP
  int experts = 0;     // E
  int top_k = 1;       // k
  bool normalize_gates = true;
  double capacity_factor = 0;  // <= 0: dropless
  CapacityFormula capacity_formula = CapacityFormula::kTokens;
  DropPolicy drop_policy = DropPolicy::kByProbability;
  uint64_t seed = 1;
};

// Parameters (deterministic from the seed, so every rank builds the same layer):
//   router  nn::Linear("moe.router", h, E, no bias, seed, init_std 0.02)  -- small logits: a uniform start
//   expert e  nn::Mlp("moe.expert.<e>", h, f, seed)
class MoeLayer {
 public:
  // Errors: InvalidArgument for h < 1, f < 1, E < 1, k < 1 or k > E.
  static absl::StatusOr<std::unique_ptr<MoeLayer>> Create(const MoeConfig& config);
  ~MoeLayer();

  // y [T, h] (formula in the file comment). An expert that receives no token is not run.
  absl::StatusOr<Tensor> Forward(const Tensor& x);
  // dx [T, h] for dy [T, h]; adds the router's and the experts' gradients into their Parameter::grad.
  // extra_dlogits [T, E] (may be null) is added to the router's logit gradient: the auxiliary losses'.
  absl::StatusOr<Tensor> Backward(const Tensor& dy, const Tensor* extra_dlogits = nullptr);

  const MoeConfig& config() const;
  // Of the last Forward.
  const Routing& routing() const;
  const Tensor& logits() const;
  nn::Linear& router();
  nn::Mlp& expert(int e);
  // Router weight first, then each expert's parameters in expert order.
  std::vector<nn::Parameter*> Parameters();

  struct Impl;
  explicit MoeLayer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_MOE_LAYER_H_
