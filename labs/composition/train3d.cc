// Lab 7 (composition), stage C: 3D training -- your implementation.
//
// Read labs/composition/train3d.h and notes/07-composition.md sections 3 and 4. You call your own Lab 4
// ShardSize/ShardOffset (labs/parallel/zero.h) and Lab 5 OneFOneB (labs/pipeline/schedule.h), and your
// stage B TensorParallelBlock.
#include "labs/composition/train3d.h"

#include "labs/composition/fsdp_pipeline.h"
#include "labs/composition/tp_block.h"
#include "labs/parallel/zero.h"
#include "labs/pipeline/schedule.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

// TODO(composition stage C): MakeZero1Sharder -- contract: train3d.h (DpSharder, MakeZero1Sharder);
//   idea: notes/07-composition.md §3-4. A class of your own deriving from DpSharder. Tools: Lab 4's ShardSize
//   and ShardOffset, nn::AdamWUpdate, tensor::Tensor with MemCategory, dp.ReduceScatter / dp.AllGather in
//   place (comm.h) on `stream`, whose work you Synchronize before reading a buffer.
absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero1Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam) {
  return Unimplemented("composition", "C", "MakeZero1Sharder");
}

// Your trainer's state. Several micro-batches are in flight on a stage: each needs its own block caches.
struct Trainer3D::Impl {};

Trainer3D::Trainer3D(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer3D::~Trainer3D() = default;

// TODO(composition stage C): Trainer3D::Create -- contract: train3d.h (Create, Placement, Unit); idea:
//   notes/07-composition.md §3. Tools: grid.axis(...), grid.first_stage() / last_stage(); nn::GptEmbedding,
//   nn::GptBlock, nn::GptHead (reference/nn/transformer.h); your TensorParallelBlock; tensor::MemoryTracker
//   with tensor::ScopedMemoryTracker for memory that is not this rank's; Lab 5's pipeline::OneFOneB.
absl::StatusOr<std::unique_ptr<Trainer3D>> Trainer3D::Create(ProcessGrid& grid, comm::Stream& stream,
                                                             const nn::GptConfig& cfg, const Layout& layout,
                                                             int64_t global_batch, nn::AdamWConfig adam) {
  return Unimplemented("composition", "C", "Trainer3D::Create");
}

// TODO(composition stage C): Trainer3D::Step -- contract: train3d.h (Data, Schedule, Communication); idea:
//   notes/07-composition.md §3. Tools: nn::Slice; Send / Recv on the pp comm, comm::GroupStart / GroupEnd
//   (close a group you opened, also on an error), stream.Synchronize; the sharder's hooks around every unit.
//   Send returns only when the peer receives: at each op boundary, who waits for whom?
absl::StatusOr<StepResult> Trainer3D::Step(const nn::Batch& global_batch) {
  return Unimplemented("composition", "C", "Trainer3D::Step");
}

// TODO(composition stage C): LocalParameters -- contract: train3d.h (LocalParameters; DpSharder::FullValues).
absl::StatusOr<std::map<std::string, std::vector<float>>> Trainer3D::LocalParameters() {
  return Unimplemented("composition", "C", "Trainer3D::LocalParameters");
}

// TODO(composition stage C): units -- contract: train3d.h (Unit: a stage's units, in order).
const std::vector<Unit>& Trainer3D::units() const {
  throw NotImplementedError("composition", "C", "Trainer3D::units");
}

// Optional (the demo's timeline figure): the ops and messages of the last step with their times.
std::vector<Trainer3D::TimedEvent> Trainer3D::timeline() const { return {}; }

}  // namespace distlab::composition
