// Lab 2 (dataloader), given; not graded: the dataset and batch types every stage uses -- samples, map-style
// and iterable-style datasets, batches -- and the course's seeded shuffle. Stage A's samplers and collate are
// in sampler.h; stage B (loader.h) puts them behind worker processes.
//
// Vocabulary: n = dataset size, B = batch size.
// A Sample is a small dense float tensor; a Batch stacks B samples of one shape into one contiguous buffer of
// shape [B, sample shape...].
//
// Left out on purpose: dtypes other than float, pinned memory.
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
// Stage E, opt-in: a stream that can say where it is can be resumed mid-epoch. Position() is a number of its
// own choosing (samples read, a file offset) after the samples it has returned; Seek(p) on a freshly opened
// stream of the same epoch continues from there. The defaults say "not resumable".
class SampleStream {
 public:
  virtual ~SampleStream() = default;
  virtual bool Next(Sample* out) = 0;
  virtual int64_t Position() const { return -1; }  // -1: this stream cannot say
  virtual absl::Status Seek(int64_t position) {
    return absl::UnimplementedError("this SampleStream cannot Seek: it does not override Position and Seek");
  }
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
// The same shuffle drawing from a generator state that the caller keeps (and that goes on where it stopped):
// SeededShuffle(v, seed) is ShuffleFrom(v, &state) with state = seed.
inline void ShuffleFrom(std::vector<int64_t>* v, uint64_t* state) {
  for (size_t i = v->size(); i > 1; --i) {
    size_t j = static_cast<size_t>(SplitMix64(state) % i);
    std::swap((*v)[i - 1], (*v)[j]);
  }
}
inline void SeededShuffle(std::vector<int64_t>* v, uint64_t seed) {
  uint64_t state = seed;
  ShuffleFrom(v, &state);
}

// Stage E: the data generator, this process's source of per-sample randomness (random augmentations): what
// Python's `random` module is to a PyTorch dataset. The loader seeds it in every reader at the start of each
// epoch (state.h: WorkerSeed) and its state is part of the loader's checkpoint (state.h: LoaderState); draws
// from anywhere else (a generator of the dataset's own, std::random_device) are neither reproducible nor
// resumable.
inline uint64_t& DataGeneratorState() {
  static uint64_t state = 0;
  return state;
}
inline uint64_t DataRandom() { return SplitMix64(&DataGeneratorState()); }

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_DATASET_H_
