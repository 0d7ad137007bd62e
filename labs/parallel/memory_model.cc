// Lab 4 (parallel), stage D: memory and communication formulas -- your implementation.
//
// Read labs/parallel/memory_model.h (the byte model is written there) and notes/04-parallel.md section 5.
#include "labs/parallel/memory_model.h"

#include "reference/base/status.h"

namespace distlab::parallel {

// TODO(parallel stage D): ParameterCount
//  1. k/v projections map h -> h * kv_heads / heads each; q and o are h x h.
//  2. MLP: 3 (gated) or 2 matrices of h x f; two norm vectors of h per layer; one final norm.
//  3. Embedding V x h, plus the same again for an untied output head.
//  Check: the Llama-3-8B shape (the defaults) gives 8,030,261,248.
int64_t ParameterCount(const TransformerShape& shape) {
  throw NotImplementedError("parallel", "D", "ParameterCount");
}

// TODO(parallel stage D): ZeroModelStates
//  1. Bytes per parameter: mixed precision 2 / 2 / 12 (weights / grads / optimizer); f32 4 / 4 / 8.
//  2. Stage >= 1 divides the optimizer state by n, >= 2 the gradients, >= 3 the weights.
ModelStateBytes ZeroModelStates(double psi, int n, int stage, bool mixed_precision) {
  throw NotImplementedError("parallel", "D", "ZeroModelStates");
}

// TODO(parallel stage D): ActivationBytesPerLayer
//  none: s b h (34 + 5 a s / h); selective: 34 s b h; full: 2 s b h; every case divided by tp.
double ActivationBytesPerLayer(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, int tp) {
  throw NotImplementedError("parallel", "D", "ActivationBytesPerLayer");
}

// TODO(parallel stage D): EstimateMemory
//  states = ZeroModelStates(ParameterCount / (tp pp), dp, zero_stage, mixed_precision);
//  activations = layers * ActivationBytesPerLayer(...) (the first 1F1B stage holds L layers' worth).
MemoryBreakdown EstimateMemory(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, const Parallelism& par) {
  throw NotImplementedError("parallel", "D", "EstimateMemory");
}

// TODO(parallel stage D): CommElementsPerRank -- 2 psi (n-1)/n for stages 0-2, 3 psi (n-1)/n for stage 3.
double CommElementsPerRank(double psi, int n, int stage) {
  throw NotImplementedError("parallel", "D", "CommElementsPerRank");
}

// TODO(parallel stage D): GradientNoiseScale (memory_model.h has the estimators)
//  1. m < 2, an empty gradient or unequal lengths: InvalidArgument naming the problem.
//  2. The mean G^, then T = sum |g_i - G^|^2 / (m - 1) and S = |G^|^2 - T / m, in double.
//  3. S <= 0: FailedPrecondition. Else B_simple = T / S.
//  Check: g = (1, 0), (3, 0) gives G^ = (2, 0), T = 2, S = 4 - 1 = 3, B_simple = 2/3.
absl::StatusOr<NoiseScale> GradientNoiseScale(const std::vector<std::vector<float>>& per_example) {
  return Unimplemented("parallel", "D", "GradientNoiseScale");
}

}  // namespace distlab::parallel
