// Lab 7 (composition), stage D: ZeRO-3 inside a pipeline stage -- your implementation.
//
// Read labs/composition/fsdp_pipeline.h and notes/07-composition.md section 5. Your Lab 4 zero.cc did
// ZeRO-3 for a whole TinyLM; here the units are a pipeline stage's, and the sharder is driven by the
// trainer's hooks (train3d.h, DpSharder).
#include "labs/composition/fsdp_pipeline.h"

#include "labs/parallel/zero.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

// TODO(composition stage D): MakeZero3Sharder -- a class deriving from DpSharder:
//  1. Construction, per unit: S = ShardSize(numel, D), offset = ShardOffset(numel, d, D); keep the own slice
//     of the padded flat values (kParameters), a zeroed gradient shard (kGradients), m and v
//     (kOptimizerState); Release() every parameter's value and grad tensor.
//  2. Gathering a unit: a flat [D S] kCommBuffers buffer, the own shard copied to its offset, AllGather in
//     place, then Allocate() each value tensor and copy its part in; free the buffer.
//  3. Reducing a unit: pack its gradients into a flat buffer, ReduceScatter (avg) in place, ADD the own
//     slice into the gradient shard.
//  4. The hooks as fsdp_pipeline.h says for reshard_after_use true and false; BeginStep zeroes the gradient
//     shards; FinishStep runs nn::AdamWUpdate on each unit's shards; FullValues gathers into a flat buffer.
absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero3Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam,
                                                            bool reshard_after_use) {
  return Unimplemented("composition", "D", "MakeZero3Sharder");
}

}  // namespace distlab::composition
