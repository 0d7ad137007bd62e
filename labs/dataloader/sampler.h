// Lab 2 (dataloader), stage A: samplers and collate -- with the datasets of dataset.h, the parts of a
// PyTorch-style DataLoader that run in one process. Stage B (loader.h) puts them behind worker processes.
//
// Vocabulary: n = dataset size, B = batch size, R = number of replicas (data-parallel ranks), r = rank.
//
// Left out on purpose: custom collate functions, weighted and subset samplers.
#ifndef DISTLAB_LABS_DATALOADER_SAMPLER_H_
#define DISTLAB_LABS_DATALOADER_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/dataloader/dataset.h"

namespace distlab::dataloader {

// Stage E: a sampler's state -- the pass its next Indices() call makes (RandomSampler: pass p, whose
// generator starts at seed + p; DistributedSampler: the epoch set_epoch gave it). That is all it needs,
// because a pass is a function of (seed, pass) alone. (torchdata's StatefulRandomSampler saves the torch
// generator's state and how many indices it has yielded: its generator goes on from pass to pass.)
struct SamplerState {
  int64_t pass = 0;
};

// Samplers. Each produces the dataset indices of one pass (one epoch).
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual int64_t size() const = 0;            // indices per pass
  virtual std::vector<int64_t> Indices() = 0;  // the next pass
};

// 0, 1, ..., n-1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n) : n_(n) {}
  int64_t size() const override;
  std::vector<int64_t> Indices() override;

 private:
  int64_t n_;
};

// torch.utils.data.RandomSampler. Pass p (0, 1, ...: one per Indices() call) draws from one generator whose
// state starts at seed + p (a new order each pass, the same orders for the same seed).
//   Without replacement: permutations of 0..n-1, each ShuffleFrom(iota(n), &state) with the state going on
//   from one permutation to the next, concatenated and cut to num_samples. So num_samples <= n is the first
//   num_samples of SeededShuffle(iota(n), seed + p), and num_samples > n gives floor(num_samples / n) whole
//   permutations and the start of one more, as PyTorch's RandomSampler does (n = 3, num_samples = 7: three
//   permutations of {0,1,2}, the third cut to 1 index).
//   With replacement: num_samples draws, each SplitMix64(&state) % n.
// num_samples < 0 means n.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed, bool replacement = false, int64_t num_samples = -1)
      : n_(n), seed_(seed), replacement_(replacement), num_samples_(num_samples < 0 ? n : num_samples) {}
  int64_t size() const override;
  std::vector<int64_t> Indices() override;
  // Stage E. A negative pass -> InvalidArgument.
  SamplerState state_dict() const;
  absl::Status load_state_dict(const SamplerState& state);

 private:
  int64_t n_;
  uint64_t seed_;
  bool replacement_;
  int64_t num_samples_;
  int64_t pass_ = 0;
};

// Groups a sampler's indices into batches of batch_size; the last, shorter batch is kept unless drop_last.
// 10 indices, batch 3 -> [[0,1,2],[3,4,5],[6,7,8],[9]]; with drop_last [9] is dropped.
class BatchSampler {
 public:
  // batch_size < 1 -> InvalidArgument.
  static absl::StatusOr<BatchSampler> Create(std::shared_ptr<Sampler> sampler, int64_t batch_size,
                                             bool drop_last);
  int64_t size() const;  // batches per pass: n / B with drop_last, ceil(n / B) without
  std::vector<std::vector<int64_t>> Batches();

 private:
  BatchSampler(std::shared_ptr<Sampler> s, int64_t b, bool d)
      : sampler_(std::move(s)), batch_size_(b), drop_last_(d) {}
  std::shared_ptr<Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

// The indices rank r of R replicas reads in one epoch (torch.utils.data.DistributedSampler):
//   1. order = 0..n-1, or with shuffle SeededShuffle(0..n-1, seed + epoch);
//   2. every rank gets the same count: without drop_last, num_samples = ceil(n / R) and the order is padded
//      to R * num_samples by repeating it from the start (as often as needed); with drop_last,
//      num_samples = floor(n / R) and the tail is cut;
//   3. rank r takes positions r, r + R, r + 2R, ... of the padded/truncated order.
// Call set_epoch(e) before each epoch: without it every epoch repeats the same order.
// With drop_last and n < R every rank gets 0 indices, as in PyTorch (an epoch of no steps: almost always a
// configuration mistake, but one that PyTorch does not flag either). PyTorch shuffles with torch.randperm
// seeded with seed + epoch; the lab with SeededShuffle: the same structure, other orders.
class DistributedSampler : public Sampler {
 public:
  // n < 0, R < 1 or r outside [0, R) -> InvalidArgument.
  static absl::StatusOr<std::shared_ptr<DistributedSampler>> Create(int64_t n, int64_t num_replicas,
                                                                    int64_t rank, bool shuffle, uint64_t seed,
                                                                    bool drop_last);
  int64_t size() const override;  // num_samples
  std::vector<int64_t> Indices() override;
  void set_epoch(int64_t epoch);
  // Stage E: {pass = the epoch}; loading is set_epoch. A negative pass -> InvalidArgument.
  SamplerState state_dict() const;
  absl::Status load_state_dict(const SamplerState& state);

  DistributedSampler(int64_t n, int64_t R, int64_t r, bool shuffle, uint64_t seed, bool drop_last)
      : n_(n), replicas_(R), rank_(r), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {}

 private:
  int64_t n_, replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
};

// Stacks samples of one shape into one contiguous batch [B, shape...] (heap storage, worker_id -1).
// Samples of different shapes -> InvalidArgument naming both shapes and positions; no samples ->
// InvalidArgument.
absl::StatusOr<Batch> Collate(const std::vector<Sample>& samples);

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_SAMPLER_H_
