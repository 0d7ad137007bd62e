// Lab 4 (parallel), stage C: ZeRO-1/2/3 -- your implementation.
//
// Read labs/parallel/zero.h (flat sharding, the three stages, the byte model) and notes/04-parallel.md
// section 4. The runtime pieces you need: nn::AdamWUpdate (the same arithmetic on a slice), Tensor's
// Release()/Allocate() (free and re-create a parameter's storage), comm::Event (wait for one gather).
#include "labs/parallel/zero.h"

#include "reference/base/status.h"

namespace distlab::parallel {

// TODO(parallel stage C): ShardSize -- ceil(numel / n).  ShardOffset -- rank * ShardSize(numel, n).
int64_t ShardSize(int64_t numel, int n) { throw NotImplementedError("parallel", "C", "ShardSize"); }
int64_t ShardOffset(int64_t numel, int rank, int n) {
  throw NotImplementedError("parallel", "C", "ShardOffset");
}

// Your state: comm, stream, model, stage, AdamW config and step count; per unit its parameters, Psi_u,
// S_u, the shards you keep (parameters for Z3, gradients for Z2/Z3, Adam m and v always); for Z3 the
// in-flight gather buffer and its Event; for Z2 the unit's count of pending gradients, its in-flight
// reduce-scatter buffer and Event, the hooks you replaced, and the first error a hook met; the trace.
struct ZeroTrainer::Impl {};

ZeroTrainer::ZeroTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
// Z2: synchronize the stream, then put back the on_grad_ready hooks you replaced.
ZeroTrainer::~ZeroTrainer() = default;

// TODO(parallel stage C): Create
//  1. Units: {embedding weight} (tied: also the projection -- one parameter, one unit), each block's
//     Parameters(), the head's Parameters() when untied.
//  2. Per unit: Adam m and v of S_u floats (kOptimizerState); Z2/Z3: a gradient shard of S_u (kGradients);
//     Z3: the rank's parameter shard (kParameters), copied from the padded flat vector, then Release() the
//     model's full values and gradients.
//  3. Z2: Release() the full gradients and install each parameter's on_grad_ready hook (keep the hook that
//     was there and call it after your own work; the destructor restores it).
absl::StatusOr<std::unique_ptr<ZeroTrainer>> ZeroTrainer::Create(comm::Comm& comm, comm::Stream& stream,
                                                                 nn::TinyLM& model, ZeroStage stage,
                                                                 nn::AdamWConfig adam) {
  return Unimplemented("parallel", "C", "ZeroTrainer::Create");
}

// TODO(parallel stage C): Step
//  Z1: 1. model.ZeroGrad(); Forward; Backward.
//      2. Per unit: pack gradients into a flat [n S_u] buffer (kCommBuffers), ReduceScatter with
//         RedOp::kAvg so the rank's averaged shard is at offset rank*S_u.
//      3. AdamWUpdate on the rank's slice of the packed parameters, AllGather the slices, unpack.
//  Z2: 1. Every parameter must have no pending use (else FailedPrecondition); set each unit's pending
//         count to its number of parameters. model.Forward(batch).
//      2. Backward unit by unit, last to first (loss().Backward(), then the head -- tied:
//         embedding().ProjectBackward -- the blocks with their residual, the embedding). Before a unit's
//         backward, Allocate() its gradients (zeroed; tied unit 0 keeps the projection's contribution).
//      3. The hook (on_grad_ready): when the unit's last gradient is final, pack its gradients into a flat
//         buffer (kCommBuffers), Release() them, launch ReduceScatter (kAvg) and Record an Event; then
//         retire the bucket launched before (Synchronize its Event, copy the own slice into the gradient
//         shard, free the buffer). Errors go to the stored status (a hook returns nothing).
//      4. After backward: the stored error, if any; retire the last bucket; then step 3 of Z1 with the
//         gradient shards.
//  Z3: 1. Forward unit by unit: launch the gather of unit 0; then for each unit u launch u+1's gather
//         (prefetch), wait for u's (Event), allocate and unpack its parameters, run it, Release() them.
//         Tied: unit 0 stays gathered until the end of backward; after the blocks, "F head" = Project.
//      2. Loss; backward from the last unit down: launch u-1's gather, wait for u's, allocate zeroed
//         gradients, run u's backward, reduce-scatter (avg) its gradients into the shard, release.
//         Tied: "B head" (ProjectBackward) first; unit 0 is neither re-gathered nor reduce-scattered
//         before its second contribution (the lookup's backward) has been added.
//      3. AdamWUpdate on every shard.
//  Micro-batches (zero.h): no micro-batches or unequal sizes: InvalidArgument. Run steps 1-2 (Z1: the
//  forward and backward of step 1) once per micro-batch with loss scale 1/k (TinyLM::Backward(scale),
//  loss().Backward(scale)); Z1 zeroes the gradients before the first only; Z2/Z3 set the gradient shard
//  from the first micro-batch's reduce-scatter and add the next ones to it. Then one update. Return the
//  mean of the micro-batch losses.
//  Z2, Z3: record the trace (zero.h names the entries). Always: model.ClearCache() before returning; no
//  communication buffer may outlive the step.
absl::StatusOr<float> ZeroTrainer::Step(const std::vector<nn::Batch>& micro_batches) {
  return Unimplemented("parallel", "C", "ZeroTrainer::Step");
}

// TODO(parallel stage C): FullParameters -- Z3: AllGather every unit's shard; Z1/Z2: read the model.
absl::StatusOr<std::vector<float>> ZeroTrainer::FullParameters() {
  return Unimplemented("parallel", "C", "ZeroTrainer::FullParameters");
}

// TODO(parallel stage C): trace (ZeRO-3's schedule of the last step).
std::vector<std::string> ZeroTrainer::trace() const { throw NotImplementedError("parallel", "C", "trace"); }

}  // namespace distlab::parallel
