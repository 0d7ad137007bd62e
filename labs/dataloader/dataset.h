// Lab 2, stage A: datasets, samplers and collate -- the three parts of a PyTorch-style DataLoader that run
// in one process. Stage B (loader.h) puts them behind worker processes.
//
// Vocabulary: n = dataset size, B = batch size, R = number of replicas (data-parallel ranks), r = rank.
// A Sample is a small dense float tensor; a Batch stacks B samples of one shape into one contiguous buffer of
// shape [B, sample shape...].
//
// Left out on purpose: dtypes other than float, pinned memory, custom collate functions.
#ifndef DISTLAB_LABS_DATALOADER_DATASET_H_
#define DISTLAB_LABS_DATALOADER_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace distlab::dataloader {

// One sample: row-major float values of `shape` (shape {} is a scalar with one value).
struct Sample {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Number of values a shape holds (1 for the scalar shape {}).
inline int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// "[3, 2]" -- how every error message writes a shape.
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Map-style dataset: random access by index. Get may throw (user code does); the loader reports it.
class MapDataset {
 public:
  virtual ~MapDataset() = default;
  virtual int64_t size() const = 0;
  virtual Sample Get(int64_t index) const = 0;
};

// One pass over an iterable-style dataset: Next fills `out` and returns true, or returns false at the end.
class SampleStream {
 public:
  virtual ~SampleStream() = default;
  virtual bool Next(Sample* out) = 0;
};

// Iterable-style dataset: a stream that ends. Open() is called once per epoch in each process that reads it
// (each worker, or the main process when num_workers = 0); a sharded dataset asks GetWorkerInfo() (loader.h)
// which part is its own.
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  virtual std::unique_ptr<SampleStream> Open() const = 0;
};

// A batch: B samples stacked into one contiguous buffer. `storage` owns the values: heap memory when the
// batch was made in this process, a shared-memory mapping when a worker process made it (stage B).
struct Batch {
  std::vector<int64_t> shape;    // [B, sample shape...]
  std::vector<int64_t> indices;  // the dataset indices of the samples (map-style; empty for iterable)
  int worker_id = -1;            // the worker that made it; -1 in the main process
  int64_t position = 0;          // 0, 1, 2, ... in the order the batches were requested this epoch
  std::shared_ptr<float> storage;
  int64_t numel = 0;
  const float* data() const { return storage.get(); }
};

// The course's reproducible shuffle (every stage uses it, so tests can compute expected orders):
// Fisher-Yates from the back, j drawn as SplitMix64(state) % (i + 1), state starting at `seed`.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
inline void SeededShuffle(std::vector<int64_t>* v, uint64_t seed) {
  uint64_t state = seed;
  for (size_t i = v->size(); i > 1; --i) {
    size_t j = static_cast<size_t>(SplitMix64(&state) % i);
    std::swap((*v)[i - 1], (*v)[j]);
  }
}

// ---------------------------------------------------------------------------------------------------------
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

// Without replacement: pass p is a permutation of 0..n-1, SeededShuffle(iota(n), seed + p) (a new order each
// pass, the same orders for the same seed). With replacement: num_samples draws, each SplitMix64(state) % n,
// state starting at seed + p. num_samples < 0 means n.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed, bool replacement = false, int64_t num_samples = -1)
      : n_(n), seed_(seed), replacement_(replacement), num_samples_(num_samples < 0 ? n : num_samples) {}
  int64_t size() const override;
  std::vector<int64_t> Indices() override;

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
class DistributedSampler : public Sampler {
 public:
  // R < 1, r outside [0, R), or n < R with drop_last -> InvalidArgument.
  static absl::StatusOr<std::shared_ptr<DistributedSampler>> Create(int64_t n, int64_t num_replicas,
                                                                    int64_t rank, bool shuffle, uint64_t seed,
                                                                    bool drop_last);
  int64_t size() const override;  // num_samples
  std::vector<int64_t> Indices() override;
  void set_epoch(int64_t epoch);

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

#endif  // DISTLAB_LABS_DATALOADER_DATASET_H_
