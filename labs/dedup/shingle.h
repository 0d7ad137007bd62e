// Lab 3 (dedup), stage A: from raw text to a set of shingle hashes, and exact Jaccard similarity.
//
// Vocabulary: a document is a UTF-8 string; its shingles are its word n-grams after normalization; a shingle
// set is the sorted, duplicate-free vector of the shingles' 64-bit hashes. J(A, B) = |A ∩ B| / |A ∪ B|.
// Left out on purpose: language-specific tokenization (words are what remains between whitespace).
#ifndef DISTLAB_LABS_DEDUP_SHINGLE_H_
#define DISTLAB_LABS_DEDUP_SHINGLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::dedup {

// The normalization rules, applied in this order (the tests compare Normalize's output byte for byte):
//   1. Unicode NFD (canonical decomposition) with ICU: "é" becomes "e" + U+0301;
//   2. drop every non-spacing combining mark (general category Mn): the accents go;
//   3. lowercase every code point (ICU's simple case mapping);
//   4. delete punctuation (general categories P*): "don't!" becomes "dont";
//   5. collapse every run of white space (Unicode White_Space) into one ' ', and trim both ends.
// Invalid UTF-8 is an InvalidArgument error naming the 0-based byte offset of the FIRST byte of the
// ill-formed sequence (the sequence as ICU's U8_NEXT delimits it: a lead byte with the continuation bytes
// that fit it, or one stray byte), in exactly this form:
//   Normalize("abc\xC3(def")   -> "invalid UTF-8 at byte offset 3: Normalize takes UTF-8 text"
//   Normalize("ab\xE2\x82(cd") -> "... at byte offset 2: ..."   (the lead byte 0xE2, not the '(' at 4)
//   Normalize("\x80" "abc")    -> "... at byte offset 0: ..."   (a continuation byte with no lead)
absl::StatusOr<std::string> Normalize(std::string_view text);

// Word n-grams of an already normalized text (words separated by single spaces), in document order, each
// the n words joined by one ' ', duplicates kept. A text of w words gives w - n + 1 shingles when w >= n;
// a text with 1 <= w < n words gives exactly ONE shingle: all of its words; an empty text gives none.
// n < 1 is an InvalidArgument error.
absl::StatusOr<std::vector<std::string>> WordShingles(std::string_view normalized, int n);

// The 64-bit hash of one shingle: XXH3_64bits over its bytes (seed 0). Every stage hashes shingles this way.
uint64_t HashShingle(std::string_view shingle);

// The shingle set of a raw text: the HashShingle values of WordShingles(Normalize(text), n), sorted, without
// repeats. The errors of those two functions (invalid UTF-8, n < 1) are ShingleSet's, unchanged.
absl::StatusOr<std::vector<uint64_t>> ShingleSet(std::string_view text, int n = 5);

// Exact Jaccard similarity of two shingle sets (sorted, duplicate-free). Two empty sets are identical: 1.0;
// an empty set and a non-empty one share nothing: 0.0.
double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

// A pair of documents (i < j) and their similarity.
struct SimilarPair {
  int i = 0;
  int j = 0;
  double jaccard = 0.0;
};

// Ground truth for small corpora: every pair i < j with Jaccard(sets[i], sets[j]) >= threshold, sorted by
// (i, j). Quadratic in the number of documents -- the cost MinHash and LSH exist to avoid.
std::vector<SimilarPair> AllPairsJaccard(const std::vector<std::vector<uint64_t>>& sets, double threshold);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_SHINGLE_H_
