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

// TODO(composition stage D): MakeZero3Sharder -- contract: fsdp_pipeline.h and train3d.h (DpSharder);
//   idea: notes/07-composition.md §5. A class of your own deriving from DpSharder. Tools: Lab 4's ShardSize
//   and ShardOffset, Tensor::Release / Allocate (a released tensor keeps its shape), AllGather and
//   ReduceScatter in place on `dp` and `stream`, nn::AdamWUpdate on a slice.
//   Follow one unit through a step of m micro-batches: which of your hooks sees it first, which last?
absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero3Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam,
                                                            bool reshard_after_use) {
  return Unimplemented("composition", "D", "MakeZero3Sharder");
}

}  // namespace distlab::composition
