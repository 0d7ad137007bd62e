// Lab 4 (parallel), stage C: ZeRO (Rajbhandari et al.) and FSDP: shard what data parallelism replicates.
//
// Vocabulary: n = data-parallel ranks, Psi = parameters, unit = the parameters of one layer of TinyLM
// (unit 0 = embedding, units 1..L = MLP blocks, unit L+1 = the untied head), Psi_u = a unit's parameters.
// Tied embeddings: the embedding E is also the output projection (logits = x E^T); it is one parameter, in
// unit 0, and the head is no unit of its own.
//
// Flat sharding: a unit's parameters, concatenated in TinyLM::Parameters() order, form a flat vector of
// Psi_u floats, padded with zeros to n * S_u, S_u = ceil(Psi_u / n); rank r owns [r S_u, (r+1) S_u). A unit's
// all-gather or reduce-scatter works on the padded vector: 4 n S_u bytes.
//
// What a rank keeps between steps (f32: 4 bytes per weight and per gradient, Adam's m and v 8), in the
// tracker's categories after Step:
//   ZeRO-1  full parameters and full gradients; Adam m and v of its own shards only.
//   ZeRO-2  full parameters; gradient shards; m and v shards.
//   ZeRO-3  parameter shards (the model's full tensors are released); gradient shards; m and v shards.
// Nothing else: no activation and no communication buffer outlives Step.
//
// Within a step (what the tracker's peaks observe):
//   ZeRO-2  the full gradients never exist all at once: gradients stay within the shards plus one unit's full
//           gradients. At most two units' flat reduce-scatter buffers are alive at once, and two are: a
//           unit's buffer is still alive when the next unit's buffer is packed.
//   ZeRO-3  untied, parameters stay within the shards plus two gathered units (the one running, the one
//           prefetched).
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

  // One training step on this rank's rows: afterwards every rank holds what one process would after one
  // AdamW step on the global batch (every rank's rows), kept as the stage says (file comment). Returns the
  // local mean loss. The communicator's payload per step (Stats.collective_bytes): ZeRO-1 and ZeRO-2 one
  // reduce-scatter and one all-gather of every unit; ZeRO-3, untied, two all-gathers and one reduce-scatter
  // of every unit (tied: what trace() shows).
  absl::StatusOr<float> Step(const nn::Batch& local) { return Step(std::vector<nn::Batch>{local}); }
  // Gradient accumulation: one optimizer step over this rank's k micro-batches, equal to one step on their
  // concatenation; returns the mean of the micro-batch losses. Errors: InvalidArgument when there is no
  // micro-batch or their sizes differ (the trainer stays usable). Collectives of every unit per step:
  // ZeRO-1 one reduce-scatter and one all-gather, whatever k; ZeRO-2 k reduce-scatters and one all-gather;
  // ZeRO-3 (untied) 2k all-gathers and k reduce-scatters.
  absl::StatusOr<float> Step(const std::vector<nn::Batch>& micro_batches);
  // All parameters, concatenated in TinyLM::Parameters() order (Z3 gathers them: a collective call).
  absl::StatusOr<std::vector<float>> FullParameters();
  // The schedule of the last Step, in the order things happened on this rank (the public tests compare it
  // with the runtime's trace of collectives).
  // ZeRO-3: "AG u" when unit u's all-gather is launched, "F u" / "B u" before its forward / backward, "RS u"
  // when its reduce-scatter is launched, "free u" when its gathered parameters are released; with tied
  // embeddings the projection's forward and backward are "F head" and "B head" (they run on unit 0's
  // parameters). Prefetch: the gather of unit u+1 (forward) or u-1 (backward) is launched before unit u
  // computes. Untied, every unit is freed after its forward -- the last one too -- and gathered again
  // when backward starts; L = 2 (units 0..3) gives exactly
  //   AG 0, AG 1, F 0, free 0, AG 2, F 1, free 1, AG 3, F 2, free 2, F 3, free 3,
  //   AG 3, AG 2, B 3, RS 3, free 3, AG 1, B 2, RS 2, free 2, AG 0, B 1, RS 1, free 1, B 0, RS 0, free 0
  // (tied, L = 1: zero_test.cc, Zero3.TiedScheduleOfOneBlock). ZeRO-2: "B u" before unit u's backward,
  // "RS u" when its reduce-scatter is launched (tied: "B head" first), e.g. "B 3", "RS 3", "B 2", "RS 2",
  // ..., "B 0", "RS 0". ZeRO-1: empty.
  std::vector<std::string> trace() const;

  struct Impl;

 private:
  explicit ZeroTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::parallel

#endif  // DISTLAB_LABS_PARALLEL_ZERO_H_
