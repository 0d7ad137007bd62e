// Lab 2 (dataloader), stage D: GPT sample construction and blending. gpt_dataset.h gives every formula; the
// note (section 4) works the examples by hand.
#include "labs/dataloader/gpt_dataset.h"

#include "absl/strings/str_cat.h"
#include "labs/dataloader/dataset.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage D): NumEpochs -- the smallest E >= 1 with E * T >= N * L + 1.
int64_t NumEpochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  throw NotImplementedError("dataloader", "D", "NumEpochs");
}

// TODO(dataloader stage D): SeparateFinalEpoch -- the 80 % rule of gpt_dataset.h (integer divisions).
bool SeparateFinalEpoch(int64_t num_epochs, int64_t tokens_per_epoch, int64_t seq_length,
                        int64_t num_samples) {
  throw NotImplementedError("dataloader", "D", "SeparateFinalEpoch");
}

// TODO(dataloader stage D): BuildDocumentIndex -- E copies of 0..D-1; shuffled as gpt_dataset.h says.
std::vector<int64_t> BuildDocumentIndex(int64_t num_documents, int64_t num_epochs, uint64_t seed,
                                        bool separate_final_epoch, bool shuffle) {
  throw NotImplementedError("dataloader", "D", "BuildDocumentIndex");
}

// TODO(dataloader stage D): BuildSampleIndex.
//   1. Row 0 is (0, 0). For each sample, walk the documents from the current (position, offset) until
//      L + 1 tokens are covered.
//   2. The sample ends *on* a token, and the next sample starts on that same token: with `remaining`
//      tokens still needed when a document has `left` tokens from the offset, the end offset is
//      offset + remaining - 1 (the boundary token is shared). Documents of length 0 are skipped.
//   3. Running past the document index -> OutOfRange (never read past the end).
absl::StatusOr<std::vector<int64_t>> BuildSampleIndex(const std::vector<int32_t>& sizes,
                                                      const std::vector<int64_t>& document_index,
                                                      int64_t seq_length, int64_t num_samples) {
  return Unimplemented("dataloader", "D", "BuildSampleIndex");
}

// TODO(dataloader stage D): BuildGptIndices.
//   1. Validate (L >= 1, N >= 1, T >= 2, lengths >= 0).
//   2. cache_key: a hash (xxhash's XXH64 is available) of a text naming every input that changes the
//      result: name, L, N, seed, shuffle and the sequence lengths. With cache_dir, load
//      <cache_dir>/<cache_key>.gptidx when it is there and consistent (loaded_from_cache = true).
//   3. Otherwise E, the separate-final-epoch flag, the document index, the sample index of
//      S = floor((E * T - 1) / L) samples, the shuffle index (seeds seed + 2 and seed + 3); then write the
//      cache (write a temporary file and rename it, so no reader sees half a file).
absl::StatusOr<GptIndices> BuildGptIndices(const std::vector<int32_t>& sizes, const GptConfig& config) {
  return Unimplemented("dataloader", "D", "BuildGptIndices");
}

// TODO(dataloader stage D): GptSample -- row r = shuffle[i]; tokens from (p0, o0) = row r to (p1, o1) =
// row r + 1 inclusive: within one document, or the tail of the first, whole middle documents and the head
// [0, o1] of the last. Exactly L + 1 tokens.
absl::StatusOr<std::vector<int64_t>> GptSample(const IndexedDataset& dataset, const GptIndices& indices,
                                               int64_t seq_length, int64_t i) {
  return Unimplemented("dataloader", "D", "GptSample");
}

// TODO(dataloader stage D): BuildBlendingIndices -- the greedy rule of gpt_dataset.h; a tie keeps the
// lowest dataset index (compare with >, not >=).
absl::StatusOr<BlendIndices> BuildBlendingIndices(const std::vector<double>& weights, int64_t size) {
  return Unimplemented("dataloader", "D", "BuildBlendingIndices");
}

}  // namespace distlab::dataloader
