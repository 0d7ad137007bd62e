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

// TODO(composition stage C): MakeZero1Sharder -- a class deriving from DpSharder (train3d.h):
//  1. Construction: numel = all the units' parameters; S = ShardSize(numel, D), offset = ShardOffset(numel,
//     d, D); AdamW m and v of S floats each (MemCategory::kOptimizerState).
//  2. BeginStep zeroes every gradient; the four unit hooks do nothing.
//  3. FinishStep: pack the gradients into a flat [D S] buffer (kCommBuffers), ReduceScatter (avg) in place
//     into its own slice; pack the values into a second flat buffer; nn::AdamWUpdate the own slice (step
//     counts from 1); AllGather in place; unpack the values. D == 1: no collective.
//  4. FullValues: the unit's current values.
absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero1Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam) {
  return Unimplemented("composition", "C", "MakeZero1Sharder");
}

// Your trainer's state: the grid and stream, the config, layout and batch, this rank's stage, its pieces (an
// nn::GptEmbedding on the first stage, its TensorParallelBlocks, an nn::GptHead on the last -- with its own
// wte copy when tied and P > 1), the units and their parameter names, the sharder, this stage's 1F1B ops.
struct Trainer3D::Impl {};

Trainer3D::Trainer3D(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer3D::~Trainer3D() = default;

// TODO(composition stage C): Trainer3D::Create
//  1. The InvalidArgument checks of train3d.h, with their messages.
//  2. This stage's pieces: first stage an nn::GptEmbedding; blocks [p L/P, (p+1) L/P), each built as a dense
//     nn::GptBlock("blocks.<l>", cfg) under a scratch tensor::MemoryTracker (tensor::ScopedMemoryTracker) and
//     sharded with TensorParallelBlock::Create on grid.axis(Axis::kTp); last stage an nn::GptHead.
//  3. The units (train3d.h) and their names; the sharder (MakeZero1Sharder, or MakeZero3Sharder for the
//     ZeRO-3 shardings) on grid.axis(Axis::kDp); the ops: pipeline::OneFOneB(P, m).stages[p].
absl::StatusOr<std::unique_ptr<Trainer3D>> Trainer3D::Create(ProcessGrid& grid, comm::Stream& stream,
                                                             const nn::GptConfig& cfg, const Layout& layout,
                                                             int64_t global_batch, nn::AdamWConfig adam) {
  return Unimplemented("composition", "C", "Trainer3D::Create");
}

// TODO(composition stage C): Trainer3D::Step
//  1. Check the batch's rows; cut this replica's sequences into m micro-batches (nn::Slice).
//  2. sharder->BeginStep(); then the ops in order. Before each op: the message the previous op produced and
//     the one this op needs, paired as train3d.h says (GroupStart / Send / Recv / GroupEnd -- always close
//     the group -- then stream.Synchronize()). F: the embedding (first stage) or the received activation,
//     every block with this micro-batch's cache, the head (last stage: the loss) or an activation to send.
//     BW: the head's backward with loss scale 1/m (last stage) or the received gradient, the blocks in
//     reverse, the embedding backward (first stage) or a gradient to send. Call the sharder's hooks around
//     every unit.
//  3. After the last op: its pending send; the embedding all-reduce (sum) of the tied wte gradient over
//     grid.embedding() when tied and P > 1; sharder->FinishStep().
absl::StatusOr<StepResult> Trainer3D::Step(const nn::Batch& global_batch) {
  return Unimplemented("composition", "C", "Trainer3D::Step");
}

// TODO(composition stage C): LocalParameters -- name -> sharder->FullValues(unit)[i], for every unit.
absl::StatusOr<std::map<std::string, std::vector<float>>> Trainer3D::LocalParameters() {
  return Unimplemented("composition", "C", "Trainer3D::LocalParameters");
}

// TODO(composition stage C): units -- the stage's units, in order.
const std::vector<Unit>& Trainer3D::units() const {
  throw NotImplementedError("composition", "C", "Trainer3D::units");
}

// Optional (the demo's timeline figure): the ops and messages of the last step with their times.
std::vector<Trainer3D::TimedEvent> Trainer3D::timeline() const { return {}; }

}  // namespace distlab::composition
