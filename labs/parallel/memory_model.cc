// Lab 4 (parallel), stage D: memory and communication formulas -- your implementation.
//
// The contracts (what is counted, the conventions of the papers) are in labs/parallel/memory_model.h; the
// derivations in notes/04-parallel.md sections 4 to 6. Stuck after trying? ./labctl hint parallel D.
#include "labs/parallel/memory_model.h"

#include "reference/base/status.h"

namespace distlab::parallel {

// TODO(parallel stage D): ParameterCount -- contract: memory_model.h (ParameterCount: what is counted);
//   idea: notes/04-parallel.md §5 (the Llama-3-8B count is the public test's).
int64_t ParameterCount(const TransformerShape& shape) {
  throw NotImplementedError("parallel", "D", "ParameterCount");
}

// TODO(parallel stage D): ZeroModelStates -- contract: memory_model.h (the byte model, ZeroModelStates);
//   idea: notes/04-parallel.md §4 (the table of what each stage shards).
ModelStateBytes ZeroModelStates(double psi, int n, int stage, bool mixed_precision) {
  throw NotImplementedError("parallel", "D", "ZeroModelStates");
}

// TODO(parallel stage D): ActivationBytesPerLayer -- contract: memory_model.h (Korthikanti et al.'s
//   formula, the recomputation policies, real arithmetic); idea: notes/04-parallel.md §5.
double ActivationBytesPerLayer(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, int tp) {
  throw NotImplementedError("parallel", "D", "ActivationBytesPerLayer");
}

// TODO(parallel stage D): EstimateMemory -- contract: memory_model.h (EstimateMemory); idea:
//   notes/04-parallel.md §5. Build it from the functions above.
MemoryBreakdown EstimateMemory(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, const Parallelism& par) {
  throw NotImplementedError("parallel", "D", "EstimateMemory");
}

// TODO(parallel stage D): CommElementsPerRank -- contract: memory_model.h (CommElementsPerRank); idea:
//   notes/04-parallel.md §4 (communication per step). What does a ring reduce-scatter send per rank?
double CommElementsPerRank(double psi, int n, int stage) {
  throw NotImplementedError("parallel", "D", "CommElementsPerRank");
}

// TODO(parallel stage D): GradientNoiseScale -- contract: memory_model.h (GradientNoiseScale: the
//   estimators and their errors); idea: notes/04-parallel.md §6. Accumulate in double.
//   Errors: InvalidArgument naming the problem (fewer than 2 gradients, an empty one, unequal lengths);
//   FailedPrecondition when the estimate of |G|^2 is not positive.
absl::StatusOr<NoiseScale> GradientNoiseScale(const std::vector<std::vector<float>>& per_example) {
  return Unimplemented("parallel", "D", "GradientNoiseScale");
}

}  // namespace distlab::parallel
