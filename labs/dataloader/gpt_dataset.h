// Lab 2 (dataloader), stage D: how Megatron turns sequences of tokens into reproducible training samples, and
// how it blends several datasets by weight.
//
// Vocabulary: T = tokens per epoch (sum of the sequence lengths), L = seq_length, N = num_samples requested,
// E = epochs needed. A sample is L + 1 tokens (inputs are tokens 0..L-1, labels tokens 1..L), and consecutive
// samples share their boundary token: sample j ends on the token sample j+1 starts with.
#ifndef DISTLAB_LABS_DATALOADER_GPT_DATASET_H_
#define DISTLAB_LABS_DATALOADER_GPT_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labs/dataloader/indexed_dataset.h"

namespace distlab::dataloader {

// E: the smallest number of epochs with E * T >= N * L + 1 (the +1 is the last sample's extra token).
int64_t NumEpochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples);

// Whether the last epoch is shuffled on its own: E > 1 and the samples the last epoch has to supply,
// N - floor(((E - 1) * T - 1) / L), are fewer than floor(0.8 * floor((T - 1) / L)). (Otherwise a barely used
// last epoch would be mixed into all the others and its few samples would oversample some documents.)
bool SeparateFinalEpoch(int64_t num_epochs, int64_t tokens_per_epoch, int64_t seq_length,
                        int64_t num_samples);

// The document index: E copies of 0..num_documents-1. With shuffle: without a separate final epoch the whole
// array is SeededShuffle'd with `seed`; with one, the first E-1 epochs are shuffled together with `seed` and
// the last epoch alone with seed + 1.
std::vector<int64_t> BuildDocumentIndex(int64_t num_documents, int64_t num_epochs, uint64_t seed,
                                        bool separate_final_epoch, bool shuffle);

// The sample index: rows (position in the document index, token offset in that document), flattened as
// [p0, o0, p1, o1, ...]. Row 0 is (0, 0); row j+1 is where sample j ends: L + 1 tokens after row j's start,
// counting the boundary token once, so it is also where sample j+1 starts. It has num_samples + 1 rows;
// running out of documents -> OutOfRange (never a read past the end).
absl::StatusOr<std::vector<int64_t>> BuildSampleIndex(const std::vector<int32_t>& sizes,
                                                      const std::vector<int64_t>& document_index,
                                                      int64_t seq_length, int64_t num_samples);

struct GptConfig {
  int64_t seq_length = 0;
  int64_t num_samples = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  std::string cache_dir;  // "" = no cache
  std::string name;       // part of the cache key (e.g. the dataset path and split)
};

struct GptIndices {
  std::vector<int64_t> document_index;
  std::vector<int64_t> sample_index;   // (S + 1) rows, S = floor((E * T - 1) / L) >= N
  std::vector<int64_t> shuffle_index;  // S entries: sample i of the dataset is sample-index row shuffle[i]
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  std::string cache_key;  // hex hash of the configuration and the sequence lengths
  bool loaded_from_cache = false;
};

// Builds (or loads from cache_dir/<cache_key>.gptidx) the three indices. The shuffle index is a permutation
// of 0..S-1: SeededShuffle(seed + 2) over all of it, or, with a separate final epoch, of the samples before
// the final epoch (floor(((E - 1) * T - 1) / L) of them) with seed + 2 and of the rest with seed + 3.
// L < 1, N < 1 or T < 2 -> InvalidArgument. A cache file that does not match is rebuilt.
absl::StatusOr<GptIndices> BuildGptIndices(const std::vector<int32_t>& sizes, const GptConfig& config);

// The L + 1 tokens of sample i (i < N): from sample-index row shuffle[i] to row shuffle[i] + 1, inclusive of
// the end token. Sequences of `dataset` are the documents.
absl::StatusOr<std::vector<int64_t>> GptSample(const IndexedDataset& dataset, const GptIndices& indices,
                                               int64_t seq_length, int64_t i);

// Blending (Megatron's greedy error-minimising choice). For sample i = 0..size-1 pick the dataset d with the
// largest weight[d] * max(i, 1) - taken[d] (ties to the lowest d); dataset_index[i] = d,
// dataset_sample_index[i] = taken[d]++. Weights are normalised to sum 1; empty, negative or all-zero weights
// -> InvalidArgument. [1/2, 1/4, 1/4], 4 samples -> dataset index [0,1,2,0], sample index [0,0,0,1].
// max(i, 1), not i (at i = 0 every error would be 0) nor i + 1: [1/3, 2/3], 8 samples -> [1,0,1,0,1,1,0,1].
// The weights are normalised as w[d] / (w[0] + w[1] + ...), summed left to right. Megatron normalises with
// numpy (w / numpy.sum(w)), which sums 8 or more weights pairwise; the last bit of a normalised weight can
// then differ, an exact tie breaks the other way, and a few picks differ from Megatron's (with fewer than
// 8 weights numpy sums left to right too and the picks agree).
struct BlendIndices {
  std::vector<int64_t> dataset_index;
  std::vector<int64_t> dataset_sample_index;
};
absl::StatusOr<BlendIndices> BuildBlendingIndices(const std::vector<double>& weights, int64_t size);

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_GPT_DATASET_H_
