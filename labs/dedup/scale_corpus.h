// Lab 3 (dedup), given; not graded: planted-duplicate corpora of any size for scale runs (`gencorpus`), and
// the exact truth for the ones small enough to check. synthetic.h is the small in-memory fixture of the
// tests; this one makes document p on demand from (seed, p), so 10^7 documents need no more memory than
// their layout (8 bytes per family of documents) and can be made by several threads in any order.
//
// The model: documents come in families. A family is one original (`words` words drawn uniformly from the
// made-up vocabulary of synthetic.h) and, for a fraction `duplicated` of the families, 1..max_copies
// near-duplicates. A copy starts as the original and receives word edits, insertions and swaps of two
// 10-word blocks until the exact Jaccard of its word n-gram set to the original's first drops to its target,
// drawn uniformly in [min_target, max_target]. The families are laid out one after another and then
// permuted (a keyed bijection of the positions), so copies land anywhere in the corpus. Each document is
// rendered with the surface noise normalization must undo (capitals, accents, punctuation, line breaks).
//
// Vocabulary: N = documents, p = a position 0..N-1 (the document's "id"), n = words per shingle.
#ifndef DISTLAB_LABS_DEDUP_SCALE_CORPUS_H_
#define DISTLAB_LABS_DEDUP_SCALE_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::dedup::scale {

struct ScaleOptions {
  int64_t documents = 100000;  // N
  int words = 200;             // words per original (copies may have a few more)
  int vocabulary = 4000;       // distinct words, at most 65535
  double duplicated = 0.25;    // fraction of originals that get near-duplicates
  int max_copies = 3;          // such an original gets 1..max_copies of them (uniform)
  double min_target = 0.5;     // a copy's target Jaccard is uniform in [min_target, max_target]
  double max_target = 1.0;
  int ngram = 5;      // the n the targets refer to
  bool noise = true;  // surface noise
  uint64_t seed = 7;
};

class ScaleCorpus {
 public:
  // Errors (InvalidArgument naming the value): documents < 1, words < ngram, ngram < 1, vocabulary outside
  // [16, 65535], duplicated outside [0, 1], max_copies < 1, targets outside (0, 1] or min > max.
  static absl::StatusOr<ScaleCorpus> Create(const ScaleOptions& options);

  int64_t size() const { return options_.documents; }
  const ScaleOptions& options() const { return options_; }

  // Document p's canonical words (vocabulary indices): what normalizing its text gives back, word for word.
  std::vector<uint16_t> Words(int64_t p) const;
  // Its family (the documents of one original share it) and its target (1 for the original).
  int64_t Family(int64_t p) const;
  double Target(int64_t p) const;
  // Its text, rendered with noise.
  std::string Text(int64_t p) const;
  // Appends {"id": p, "text": "<its text, JSON-escaped>"} and '\n'.
  void AppendJsonLine(int64_t p, std::string& out) const;

  // The word n-gram set of canonical words: each n-gram packed into 64 bits exactly (n * bits per word <= 64,
  // as for n = 5 and up to 4096 words) or else its XXH3 hash; sorted, without repeats.
  std::vector<uint64_t> NgramSet(const std::vector<uint16_t>& words) const;
  bool ngrams_exact() const { return bits_ * options_.ngram <= 64; }

 private:
  ScaleCorpus() = default;
  struct Slot {
    int64_t family;
    int member;  // 0 = the original
  };
  Slot SlotOf(int64_t p) const;
  std::vector<uint16_t> Original(int64_t family) const;
  std::vector<uint16_t> Copy(int64_t family, int member) const;
  void Render(int64_t p, const std::vector<uint16_t>& words, bool json, std::string& out) const;

  ScaleOptions options_;
  int bits_ = 0;                    // bits per word index
  int half_bits_ = 0;               // the permutation works on 2 * half_bits_ bits
  std::vector<int64_t> starts_;     // [families + 1]: first slot of each family
  std::vector<std::string> forms_;  // [vocabulary * 4]: plain, Capitalized, accented, both
};

struct TruePair {
  int64_t i = 0, j = 0;  // i < j
  double jaccard = 0.0;
};

// Every pair i < j whose exact Jaccard of word n-gram sets (ScaleCorpus::NgramSet of the canonical words: no
// normalization, no hashing of the lab's) is >= threshold, sorted by (i, j). Exact by prefix filtering: two
// sets with J >= t share an n-gram among the first |A| - ceil(t |A|) + 1 of A and the first
// |B| - ceil(t |B|) + 1 of B (in one fixed order), so only pairs that share one are compared. Holds every
// set in memory (about 1.6 KB per 200-word document): for corpora up to about 10^6 documents.
std::vector<TruePair> TruePairs(const ScaleCorpus& corpus, double threshold, int threads);

}  // namespace distlab::dedup::scale

#endif  // DISTLAB_LABS_DEDUP_SCALE_CORPUS_H_
