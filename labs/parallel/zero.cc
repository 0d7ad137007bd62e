// Lab 4 stage C: ZeRO-1/2/3 -- your implementation.
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
// S_u, the shards you keep (parameters for Z3, gradients for Z2/Z3, Adam m and v always) and, for Z3, the
// in-flight gather buffer and its Event; the trace.
struct ZeroTrainer::Impl {};

ZeroTrainer::ZeroTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZeroTrainer::~ZeroTrainer() = default;

// TODO(parallel stage C): Create
//  1. Z3 with tie_embeddings: InvalidArgument (a tied weight would span two units).
//  2. Units: {embedding weight}, each block's Parameters(), the head's Parameters() when untied.
//  3. Per unit: Adam m and v of S_u floats (kOptimizerState); Z2/Z3: a gradient shard of S_u (kGradients);
//     Z3: the rank's parameter shard (kParameters), copied from the padded flat vector, then Release() the
//     model's full values and gradients. Z2: Release() the full gradients (they come back in Step).
absl::StatusOr<std::unique_ptr<ZeroTrainer>> ZeroTrainer::Create(comm::Comm& comm, comm::Stream& stream,
                                                                 nn::TinyLM& model, ZeroStage stage,
                                                                 nn::AdamWConfig adam) {
  return Unimplemented("parallel", "C", "ZeroTrainer::Create");
}

// TODO(parallel stage C): Step
//  Z1/Z2: 1. model.ZeroGrad(); Forward; Backward.
//         2. Per unit: pack gradients into a flat [n S_u] buffer (kCommBuffers), ReduceScatter with
//            RedOp::kAvg so the rank's averaged shard is at offset rank*S_u. Z2: Release() full gradients.
//         3. AdamWUpdate on the rank's slice of the packed parameters, AllGather the slices, unpack.
//  Z3:    1. Forward unit by unit: launch the gather of unit 0; then for each unit u launch u+1's gather
//            (prefetch), wait for u's (Event), allocate and unpack its parameters, run it, Release() them.
//         2. Loss; backward from the last unit down: launch u-1's gather, wait for u's, allocate zeroed
//            gradients, run u's backward, reduce-scatter (avg) its gradients into the shard, release.
//         3. AdamWUpdate on every shard. Record the trace (zero.h names the entries).
//  Always: model.ClearCache() before returning; no communication buffer may outlive the step.
absl::StatusOr<float> ZeroTrainer::Step(const nn::Batch& local) {
  return Unimplemented("parallel", "C", "ZeroTrainer::Step");
}

// TODO(parallel stage C): FullParameters -- Z3: AllGather every unit's shard; Z1/Z2: read the model.
absl::StatusOr<std::vector<float>> ZeroTrainer::FullParameters() {
  return Unimplemented("parallel", "C", "ZeroTrainer::FullParameters");
}

// TODO(parallel stage C): trace (ZeRO-3's schedule of the last step).
std::vector<std::string> ZeroTrainer::trace() const { throw NotImplementedError("parallel", "C", "trace"); }

}  // namespace distlab::parallel
