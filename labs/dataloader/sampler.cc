// Lab 2 (dataloader), stage A: samplers and collate. Read notes/02-dataloader.md section 1 first.
//
// Fill in each TODO. Every function states its contract; the public tests in sampler_test.cc draw the
// expected batches. Until a function is done it fails with "TODO(dataloader stage A): <name>".
#include "labs/dataloader/sampler.h"

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage A): SequentialSampler -- size() is n; Indices() is 0, 1, ..., n-1.
int64_t SequentialSampler::size() const {
  throw NotImplementedError("dataloader", "A", "SequentialSampler::size");
}
std::vector<int64_t> SequentialSampler::Indices() {
  throw NotImplementedError("dataloader", "A", "SequentialSampler::Indices");
}

// TODO(dataloader stage A): RandomSampler (dataset.h has the exact formulas).
//   1. size() is num_samples_.
//   2. Each call to Indices() is one pass p = pass_++, seeded with seed_ + p.
//   3. One generator state per pass, starting at seed_ + p.
//   4. Without replacement: permutations ShuffleFrom(0..n-1, &state), the state going on from one to the
//      next, until num_samples_ indices are there (the last permutation cut): num_samples_ may exceed n.
//   5. With replacement: num_samples_ draws SplitMix64(&state) % n.
//   6. n = 0: an empty pass.
int64_t RandomSampler::size() const { throw NotImplementedError("dataloader", "A", "RandomSampler::size"); }
std::vector<int64_t> RandomSampler::Indices() {
  throw NotImplementedError("dataloader", "A", "RandomSampler::Indices");
}

// TODO(dataloader stage E): RandomSampler's state is the pass its next Indices() call makes (pass_);
// load_state_dict sets it (a negative pass -> InvalidArgument), so the next Indices() repeats that pass.
SamplerState RandomSampler::state_dict() const {
  throw NotImplementedError("dataloader", "E", "RandomSampler::state_dict");
}
absl::Status RandomSampler::load_state_dict(const SamplerState& state) {
  return Unimplemented("dataloader", "E", "RandomSampler::load_state_dict");
}

// TODO(dataloader stage A): BatchSampler.
//   1. Create: null sampler or batch_size < 1 -> InvalidArgument naming the value.
//   2. size(): n / B with drop_last, ceil(n / B) without (careful: not n / B + 1 when B divides n).
//   3. Batches(): consecutive groups of B indices of one sampler pass; the short last group is kept unless
//      drop_last. 10 items, B = 3 -> [[0,1,2],[3,4,5],[6,7,8],[9]].
absl::StatusOr<BatchSampler> BatchSampler::Create(std::shared_ptr<Sampler> sampler, int64_t batch_size,
                                                  bool drop_last) {
  return Unimplemented("dataloader", "A", "BatchSampler::Create");
}
int64_t BatchSampler::size() const { throw NotImplementedError("dataloader", "A", "BatchSampler::size"); }
std::vector<std::vector<int64_t>> BatchSampler::Batches() {
  throw NotImplementedError("dataloader", "A", "BatchSampler::Batches");
}

// TODO(dataloader stage A): DistributedSampler (the three steps are in dataset.h).
//   1. Create: R < 1, r outside [0, R) or n < 0 -> InvalidArgument (drop_last with n < R is allowed: every
//      rank gets 0 indices, as in PyTorch).
//   2. size(): ceil(n / R), or floor(n / R) with drop_last -- the same on every rank, or the ranks'
//      collectives stop matching.
//   3. Indices(): order (shuffled with seed_ + epoch_ when shuffle_), padded by repeating it from the start
//      (padding may be longer than n: 2 samples on 5 ranks -> 0,1,0,1,0) or truncated, then positions
//      r, r+R, ...
//   4. set_epoch(e): remember e; Indices() uses it.
absl::StatusOr<std::shared_ptr<DistributedSampler>> DistributedSampler::Create(
    int64_t n, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed, bool drop_last) {
  return Unimplemented("dataloader", "A", "DistributedSampler::Create");
}
int64_t DistributedSampler::size() const {
  throw NotImplementedError("dataloader", "A", "DistributedSampler::size");
}
void DistributedSampler::set_epoch(int64_t epoch) {
  throw NotImplementedError("dataloader", "A", "DistributedSampler::set_epoch");
}
std::vector<int64_t> DistributedSampler::Indices() {
  throw NotImplementedError("dataloader", "A", "DistributedSampler::Indices");
}

// TODO(dataloader stage E): DistributedSampler's state is its epoch ({pass = epoch_}); loading it is
// set_epoch (a negative epoch -> InvalidArgument).
SamplerState DistributedSampler::state_dict() const {
  throw NotImplementedError("dataloader", "E", "DistributedSampler::state_dict");
}
absl::Status DistributedSampler::load_state_dict(const SamplerState& state) {
  return Unimplemented("dataloader", "E", "DistributedSampler::load_state_dict");
}

// TODO(dataloader stage A): Collate.
//   1. No samples -> InvalidArgument.
//   2. Every sample must have sample 0's shape; otherwise InvalidArgument naming both shapes and the
//      position ("sample 2 has shape [3] but sample 0 has shape [2]"); a sample whose data size does not
//      match its shape is an error too.
//   3. Result: shape [B, shape...], numel B * NumElements(shape), one heap buffer (storage) holding the
//      samples back to back; worker_id -1.
absl::StatusOr<Batch> Collate(const std::vector<Sample>& samples) {
  return Unimplemented("dataloader", "A", "Collate");
}

}  // namespace distlab::dataloader
