// Lab 7 (composition), stage E: the cost model and the planner -- your implementation.
//
// Read labs/composition/planner.h (every formula is there) and notes/07-composition.md section 6.
#include "labs/composition/planner.h"

#include "labs/parallel/zero.h"
#include "reference/base/status.h"

namespace distlab::composition {

// TODO(composition stage E): PredictStage -- the checks of Trainer3D::Create, then the units of the stage
// (embed on the first, L_s blocks of nn::BlockParameters(cfg, T), the head on the last), their shards
// (ShardSize), and the traffic and memory of the header's table for the layout's DpSharding.
absl::StatusOr<StagePrediction> PredictStage(const nn::GptConfig& cfg, const Layout& layout,
                                             int64_t global_batch, int stage) {
  return Unimplemented("composition", "E", "PredictStage");
}

// TODO(composition stage E): EnumerateLayouts -- dp, then pp ascending (tp = world / (dp pp)), then m.
std::vector<Layout> EnumerateLayouts(const nn::GptConfig& cfg, int world, int64_t global_batch) { return {}; }

// TODO(composition stage E): MakePlan -- for each layout: PredictStage of every stage (memory), the links
// by group size, F_p and B_p, the slowest stage, pipeline_s, dp_s, emb_s, step_s; then the best that fits.
absl::StatusOr<Plan> MakePlan(const nn::GptConfig& cfg, int world, int64_t global_batch,
                              const Cluster& cluster) {
  return Unimplemented("composition", "E", "MakePlan");
}

}  // namespace distlab::composition
