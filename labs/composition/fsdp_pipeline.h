// Lab 7 (composition), stage D: ZeRO-3 / FSDP inside a pipeline stage, and its conflict with pipelining
// (the interface of fsdp_pipeline.cc). Read notes/07-composition.md section 5.
//
// Both sharders keep only shards between steps: of every unit, 1/D of its flat parameters (kParameters),
// gradients (kGradients) and AdamW m and v (kOptimizerState): 16 S_u bytes per unit, S_u = ShardSize(Psi_u,
// D). The model's own tensors of the stage are released (Tensor::Release) while not gathered, and a unit's
// tensors hold its full values (and, around its backward, its full gradients) whenever the trainer runs it.
// The two policies (the names are PyTorch FSDP's; what a test observes per unit and step, on the dp comm):
//
//   reshard after every use (kZero3Reshard; FSDP's reshard_after_forward = True): the unit is gathered only
//     for the duration of each forward and each backward of each micro-batch. Dp traffic: 2m all-gathers and
//     m reduce-scatters (avg), each of the unit's padded flat vector, 4 D S_u bytes.
//   keep gathered for the step (kZero3KeepGathered; PyTorch's pipelining with FSDP, torchtitan with PP): the
//     unit is gathered from its first use in a step to its last. Dp traffic: 1 all-gather and 1
//     reduce-scatter (avg) of 4 D S_u bytes.
//
// Both train exactly as the dense model does (train3d.h, Data), and FinishStep updates the own shards only
// (nn::AdamWUpdate), nothing gathered. Flat buffers for the collectives are kCommBuffers, freed right after
// each one. No prefetch: in reshard mode at most one unit is gathered at a time (the peak of parameters is
// the shards plus one unit); in keep mode the whole stage is, from its first forward to its last backward.
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
