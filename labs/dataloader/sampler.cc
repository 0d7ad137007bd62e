// Lab 2 (dataloader), stage A: samplers and collate. Read notes/02-dataloader.md section 1 first.
//
// Fill in each TODO. Every function states its contract in sampler.h; the public tests in sampler_test.cc
// draw the expected batches. Until a function is done it fails with "TODO(dataloader stage A): <name>".
// Stuck? ./labctl hint dataloader A (three levels, from a nudge to the recipe).
#include "labs/dataloader/sampler.h"

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage A): SequentialSampler -- contract: sampler.h (SequentialSampler); idea:
//   notes/02-dataloader.md §1.
int64_t SequentialSampler::size() const {
  throw NotImplementedError("dataloader", "A", "SequentialSampler::size");
}
std::vector<int64_t> SequentialSampler::Indices() {
  throw NotImplementedError("dataloader", "A", "SequentialSampler::Indices");
}

// TODO(dataloader stage A): RandomSampler -- contract: sampler.h (RandomSampler); idea:
//   notes/02-dataloader.md §1. Tools: dataset.h's SplitMix64 and ShuffleFrom, which draw from a generator
//   state you keep; never std::shuffle or std::random_device (their orders are not the course's).
//   What must one pass depend on, so that the same seed gives the same passes on every machine?
int64_t RandomSampler::size() const { throw NotImplementedError("dataloader", "A", "RandomSampler::size"); }
std::vector<int64_t> RandomSampler::Indices() {
  throw NotImplementedError("dataloader", "A", "RandomSampler::Indices");
}

// TODO(dataloader stage E): RandomSampler::state_dict, load_state_dict -- contract: sampler.h (SamplerState,
//   RandomSampler); idea: notes/02-dataloader.md §5.
SamplerState RandomSampler::state_dict() const {
  throw NotImplementedError("dataloader", "E", "RandomSampler::state_dict");
}
absl::Status RandomSampler::load_state_dict(const SamplerState& state) {
  return Unimplemented("dataloader", "E", "RandomSampler::load_state_dict");
}

// TODO(dataloader stage A): BatchSampler -- contract: sampler.h (BatchSampler); idea: notes/02-dataloader.md
//   §1. Errors: a null sampler or batch_size < 1 -> InvalidArgument naming the value.
//   size() is asked before any pass is drawn: does your count agree with Batches() for every n and B?
absl::StatusOr<BatchSampler> BatchSampler::Create(std::shared_ptr<Sampler> sampler, int64_t batch_size,
                                                  bool drop_last) {
  return Unimplemented("dataloader", "A", "BatchSampler::Create");
}
int64_t BatchSampler::size() const { throw NotImplementedError("dataloader", "A", "BatchSampler::size"); }
std::vector<std::vector<int64_t>> BatchSampler::Batches() {
  throw NotImplementedError("dataloader", "A", "BatchSampler::Batches");
}

// TODO(dataloader stage A): DistributedSampler -- contract: sampler.h (DistributedSampler, PyTorch's
//   torch.utils.data.DistributedSampler); idea: notes/02-dataloader.md §1. Errors: sampler.h lists them.
//   Tools: dataset.h's SeededShuffle. Every rank computes its list alone, without talking to the others:
//   what must all R of them agree on?
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

// TODO(dataloader stage E): DistributedSampler::state_dict, load_state_dict -- contract: sampler.h
//   (SamplerState, DistributedSampler); idea: notes/02-dataloader.md §5.
SamplerState DistributedSampler::state_dict() const {
  throw NotImplementedError("dataloader", "E", "DistributedSampler::state_dict");
}
absl::Status DistributedSampler::load_state_dict(const SamplerState& state) {
  return Unimplemented("dataloader", "E", "DistributedSampler::load_state_dict");
}

// TODO(dataloader stage A): Collate -- contract: sampler.h (Collate) and dataset.h (Batch); idea:
//   notes/02-dataloader.md §1. The Batch owns its values through `storage` (a shared_ptr<float>): one heap
//   buffer, which must outlive `samples`. dataset.h's ShapeString writes a shape as every message does.
//   Errors: no samples; a sample whose shape differs from sample 0's (name both shapes and the position:
//   "sample 2 has shape [3] but sample 0 has shape [2]"); a sample whose data does not fill its shape.
absl::StatusOr<Batch> Collate(const std::vector<Sample>& samples) {
  return Unimplemented("dataloader", "A", "Collate");
}

}  // namespace distlab::dataloader
