// Lab 7 (composition), stage E: the cost model and the planner -- your implementation.
//
// Read labs/composition/planner.h (the model and its conventions) and notes/07-composition.md section 6.
#include "labs/composition/planner.h"

#include "labs/parallel/zero.h"
#include "reference/base/status.h"

namespace distlab::composition {

// TODO(composition stage E): PredictStage -- contract: planner.h (PredictStage, its table); idea:
//   notes/07-composition.md §4-6. Tools: nn::BlockParameters, nn::BlockCacheBytes, Lab 4's ShardSize.
//   Which ledger of a real run (stages C and D) does each field predict?
absl::StatusOr<StagePrediction> PredictStage(const nn::GptConfig& cfg, const Layout& layout,
                                             int64_t global_batch, int stage) {
  return Unimplemented("composition", "E", "PredictStage");
}

// TODO(composition stage E): EnumerateLayouts -- contract: planner.h (EnumerateLayouts: which, in what
// order).
std::vector<Layout> EnumerateLayouts(const nn::GptConfig& cfg, int world, int64_t global_batch) { return {}; }

// TODO(composition stage E): MakePlan -- contract: planner.h (the time model, Candidate, Plan, the errors);
//   idea: notes/07-composition.md §6. Tools: AllReduceTime, GatherTime, P2PTime (given), your PredictStage.
//   Lab 5 derived 1F1B's makespan: what is it when every stage costs the same?
absl::StatusOr<Plan> MakePlan(const nn::GptConfig& cfg, int world, int64_t global_batch,
                              const Cluster& cluster) {
  return Unimplemented("composition", "E", "MakePlan");
}

}  // namespace distlab::composition
