// Lab 7 (composition), stage D: ZeRO-3 / FSDP inside a pipeline stage, and its conflict with pipelining
// (the interface of fsdp_pipeline.cc). Read notes/07-composition.md section 5.
//
// Both sharders keep only shards between steps: of every unit, 1/D of its flat parameters (kParameters),
// gradients (kGradients) and AdamW m and v (kOptimizerState): 16 S_u bytes per unit, S_u = ShardSize(Psi_u,
// D). The model's own tensors of the stage are released (Tensor::Release) while not gathered.
//
//   reshard after every use (kZero3Reshard; FSDP's default, reshard_after_forward = True):
//     BeforeForward and BeforeBackward of every micro-batch: all-gather the unit's flat parameters into its
//     tensors (and, before a backward, zeroed full gradients); AfterForward: free the parameters;
//     AfterBackward: reduce-scatter (avg) the unit's flat gradients, add the result into the gradient shard
//     (micro-batches accumulate there), free parameters and gradients.
//     Per unit per step: 2m all-gathers and m reduce-scatters -- 3m collectives of D S_u elements.
//   keep gathered for the step (kZero3KeepGathered; PyTorch's pipelining with FSDP, torchtitan with PP):
//     the first BeforeForward of a step all-gathers the unit and allocates zeroed full gradients; nothing
//     happens around the other micro-batches (gradients accumulate in the full tensors); the AfterBackward
//     of the last micro-batch reduce-scatters once into the gradient shard and frees parameters and
//     gradients. Per unit per step: 1 all-gather and 1 reduce-scatter -- but the whole stage's parameters and
//     gradients are resident from its first forward to its last backward: the memory win is gone for the
//     length of the step.
// FinishStep (both): AdamWUpdate of the own shards (Lab 4's arithmetic on a slice), nothing gathered.
// Flat buffers for the collectives are kCommBuffers, freed right after each one. One unit is gathered at a
// time (no prefetch), so in reshard mode peak(parameters) <= 4 (sum_u S_u + D max_u S_u).
#ifndef DISTLAB_LABS_COMPOSITION_FSDP_PIPELINE_H_
#define DISTLAB_LABS_COMPOSITION_FSDP_PIPELINE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/composition/train3d.h"
#include "reference/comm/comm.h"
#include "reference/nn/optim.h"

namespace distlab::composition {

// Takes the units' current values as the initial parameters, keeps the own shards and releases the full
// tensors. reshard_after_use: kZero3Reshard (true) or kZero3KeepGathered (false).
absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero3Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam,
                                                            bool reshard_after_use);

}  // namespace distlab::composition

#endif  // DISTLAB_LABS_COMPOSITION_FSDP_PIPELINE_H_
