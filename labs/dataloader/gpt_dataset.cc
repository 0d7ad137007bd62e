// Lab 2 (dataloader), stage D: GPT sample construction and blending. gpt_dataset.h states Megatron's rules;
// notes/02-dataloader.md section 4 works the examples by hand. Until a function is done it fails with
// "TODO(dataloader stage D): <name>". Stuck? ./labctl hint dataloader D
#include "labs/dataloader/gpt_dataset.h"

#include "absl/strings/str_cat.h"
#include "labs/dataloader/dataset.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage D): NumEpochs -- contract: gpt_dataset.h (NumEpochs); idea:
//   notes/02-dataloader.md §4. N * L can be large: compute in integers, never through a double.
int64_t NumEpochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  throw NotImplementedError("dataloader", "D", "NumEpochs");
}

// TODO(dataloader stage D): SeparateFinalEpoch -- contract: gpt_dataset.h (SeparateFinalEpoch: Megatron's
//   rule, every division an integer one); idea: notes/02-dataloader.md §4.
bool SeparateFinalEpoch(int64_t num_epochs, int64_t tokens_per_epoch, int64_t seq_length,
                        int64_t num_samples) {
  throw NotImplementedError("dataloader", "D", "SeparateFinalEpoch");
}

// TODO(dataloader stage D): BuildDocumentIndex -- contract: gpt_dataset.h (BuildDocumentIndex); idea:
//   notes/02-dataloader.md §4. Tools: dataset.h's SeededShuffle.
std::vector<int64_t> BuildDocumentIndex(int64_t num_documents, int64_t num_epochs, uint64_t seed,
                                        bool separate_final_epoch, bool shuffle) {
  throw NotImplementedError("dataloader", "D", "BuildDocumentIndex");
}

// TODO(dataloader stage D): BuildSampleIndex -- contract: gpt_dataset.h (the vocabulary, BuildSampleIndex);
//   idea: notes/02-dataloader.md §4 (its figure). Errors: running out of documents -> OutOfRange.
//   A sample needs L + 1 tokens but its first is the previous sample's last: how many does each new row add?
absl::StatusOr<std::vector<int64_t>> BuildSampleIndex(const std::vector<int32_t>& sizes,
                                                      const std::vector<int64_t>& document_index,
                                                      int64_t seq_length, int64_t num_samples) {
  return Unimplemented("dataloader", "D", "BuildSampleIndex");
}

// TODO(dataloader stage D): BuildGptIndices -- contract: gpt_dataset.h (GptConfig, GptIndices,
//   BuildGptIndices); idea: notes/02-dataloader.md §4. Tools: XXH64 from <xxhash.h> (linked for you);
//   rename(2), which replaces a file in one step. Errors: gpt_dataset.h lists them.
//   Every rank may build or read the same cache file at the same moment: what may a reader ever see?
absl::StatusOr<GptIndices> BuildGptIndices(const std::vector<int32_t>& sizes, const GptConfig& config) {
  return Unimplemented("dataloader", "D", "BuildGptIndices");
}

// TODO(dataloader stage D): GptSample -- contract: gpt_dataset.h (GptSample, the sample index); idea:
//   notes/02-dataloader.md §4. Tools: IndexedDataset::Get (a sequence of the dataset is a document).
//   Which documents does a sample touch when its two rows lie in different documents?
absl::StatusOr<std::vector<int64_t>> GptSample(const IndexedDataset& dataset, const GptIndices& indices,
                                               int64_t seq_length, int64_t i) {
  return Unimplemented("dataloader", "D", "GptSample");
}

// TODO(dataloader stage D): BuildBlendingIndices -- contract: gpt_dataset.h (Blending: Megatron's greedy
//   rule, its tie-break, how the weights are normalised); idea: notes/02-dataloader.md §4. Errors:
//   gpt_dataset.h lists them.
absl::StatusOr<BlendIndices> BuildBlendingIndices(const std::vector<double>& weights, int64_t size) {
  return Unimplemented("dataloader", "D", "BuildBlendingIndices");
}

}  // namespace distlab::dataloader
