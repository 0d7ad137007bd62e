// Lab 4 (parallel), stage C: ZeRO (Rajbhandari et al.) and FSDP: shard what data parallelism replicates.
//
// Vocabulary: n = data-parallel ranks, Psi = parameters, unit = the parameters of one layer of TinyLM
// (unit 0 = embedding, units 1..L = MLP blocks, unit L+1 = the untied head), Psi_u = a unit's parameters.
//
// Flat sharding: a unit's parameters, concatenated in TinyLM::Parameters() order, form a flat vector of
// Psi_u floats, padded with zeros to n * S_u, S_u = ceil(Psi_u / n); rank r owns [r S_u, (r+1) S_u).
//
//   ZeRO-1  every rank keeps full parameters and gradients; Adam's m and v only for its shard.
//           After backward: reduce-scatter (avg) the gradients, update the own shard, all-gather parameters.
//   ZeRO-2  only gradient shards persist. Each unit is a bucket: backward runs unit by unit, a unit's
//           full gradients are allocated just before its backward, and the moment its last gradient is
//           final (Parameter::on_grad_ready) they are packed into a flat buffer, freed, and the averaging
//           reduce-scatter is launched on the stream while backward goes on. Launching a bucket retires
//           the one before (wait, keep the shard, free the buffer): at most two buffers in flight.
//           After backward: retire the last, update the own shards, all-gather the parameters.
//   ZeRO-3  parameters sharded too (FSDP): before a unit runs, all-gather its parameters; free them after;
//           launch the gather of the NEXT unit (forward: u+1, backward: u-1) before computing this one;
//           in backward reduce-scatter the unit's gradients and free them.
//
// Tied embeddings (the embedding E is also the output projection x E^T): E is one parameter, in unit 0,
// used first and last in forward and first and last in backward. Its gradient is final only after both
// contributions (projection backward, then lookup backward), so unit 0 is reduce-scattered once, last.
// ZeRO-3 gathers unit 0 once per step and keeps it until the end of backward (FSDP keeps its root unit
// the same way), so no unit is gathered for the head: with L blocks the schedule is
//   AG 0, AG 1, F 0, AG 2, F 1, free 1, ..., F L, free L, F head, AG L, B head, AG L-1, B L, RS L, free L,
//   ..., B 1, RS 1, free 1, B 0, RS 0, free 0
// and the collective payload per step is 4 (3 Psi - Psi_0) bytes (unit 0 is gathered once, not twice).
//
// Bytes per rank after a step, f32 training (what this lab trains and measures):
//   Z1: 4 Psi + 4 Psi + 8 Psi / n     Z2: 4 Psi + 12 Psi / n     Z3: 16 Psi / n
// (mixed precision, 2 + 2 + 12 bytes: Z1 4 Psi + 12 Psi / n, Z2 2 Psi + 14 Psi / n, Z3 16 Psi / n).
// Collective payload S per step: Z1, Z2 = RS + AG of 4 Psi bytes; Z3 = 2 AG + 1 RS; per-rank wire bytes of
// ring algorithms: 2 Psi (n-1)/n (as DDP's all-reduce) and 3 Psi (n-1)/n elements.
#ifndef DISTLAB_LABS_PARALLEL_ZERO_H_
#define DISTLAB_LABS_PARALLEL_ZERO_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"
#include "reference/nn/model.h"
#include "reference/nn/optim.h"

namespace distlab::parallel {

enum class ZeroStage { kZero1 = 1, kZero2 = 2, kZero3 = 3 };

// S_u = ceil(numel / n): the shard length every rank holds (the last shards may be padding).
int64_t ShardSize(int64_t numel, int n);
// The offset of rank r's shard in the padded flat vector: r * ShardSize(numel, n).
int64_t ShardOffset(int64_t numel, int rank, int n);

class ZeroTrainer {
 public:
  // Takes over `model` (which must outlive the trainer) for comm.rank() of comm.size(); tied or untied
  // embeddings. Every rank must pass an identical model. ZeRO-3 keeps parameter shards (kParameters) and
  // releases the model's full tensors; ZeRO-2 releases the full gradients and installs on_grad_ready
  // hooks: a hook already installed is kept and called after the trainer's own work (so an observer sees
  // the reduce-scatter already launched); the destructor puts the old hooks back.
  static absl::StatusOr<std::unique_ptr<ZeroTrainer>> Create(comm::Comm& comm, comm::Stream& stream,
                                                             nn::TinyLM& model, ZeroStage stage,
                                                             nn::AdamWConfig adam);
  ~ZeroTrainer();

  // One training step on this rank's rows: forward, backward, gradient reduce-scatter (averaged), AdamW
  // on the own shards, parameter all-gather (Z1, Z2). Returns the local mean loss. Activations and
  // communication buffers are freed before it returns.
  absl::StatusOr<float> Step(const nn::Batch& local) { return Step(std::vector<nn::Batch>{local}); }
  // Gradient accumulation: one optimizer step over this rank's k micro-batches (non-empty, equal sizes,
  // else InvalidArgument), each run forward and backward with loss scale 1/k, so the step equals one step
  // on their concatenation. Z1 accumulates full gradients locally and reduce-scatters once (gradient
  // payload 4 Psi bytes per step). Z2 and Z3 keep no full gradient to accumulate into: every micro-batch's
  // backward reduce-scatters, and the averaged slices add up in the gradient shard (payload k 4 Psi) --
  // memory bought with bandwidth. Z3 also gathers the parameters again for every micro-batch: per step
  // Z1 2, Z2 k + 1, Z3 3k collectives of 4 Psi bytes. Returns the mean of the micro-batch losses.
  absl::StatusOr<float> Step(const std::vector<nn::Batch>& micro_batches);
  // All parameters, concatenated in TinyLM::Parameters() order (Z3 gathers them: a collective call).
  absl::StatusOr<std::vector<float>> FullParameters();
  // The schedule of the last Step. ZeRO-3: "AG u" when unit u's all-gather is launched, "F u" / "B u"
  // before its forward / backward, "RS u" when its reduce-scatter is launched, "free u" when its gathered
  // parameters are released. Untied, every unit is freed after its forward -- the last one too -- and
  // gathered again when backward starts; L = 2 (units 0..3) gives exactly
  //   AG 0, AG 1, F 0, free 0, AG 2, F 1, free 1, AG 3, F 2, free 2, F 3, free 3,
  //   AG 3, AG 2, B 3, RS 3, free 3, AG 1, B 2, RS 2, free 2, AG 0, B 1, RS 1, free 1, B 0, RS 0, free 0
  // (tied: the schedule in the file comment, with "F head" and "B head"). ZeRO-2: "B u" before unit u's
  // backward, "RS u" when its reduce-scatter is launched (tied: "B head" first), e.g. "B 3", "RS 3", "B 2",
  // "RS 2", ..., "B 0", "RS 0". ZeRO-1: empty.
  std::vector<std::string> trace() const;

  struct Impl;

 private:
  explicit ZeroTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::parallel

#endif  // DISTLAB_LABS_PARALLEL_ZERO_H_
