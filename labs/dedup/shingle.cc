// Lab 3 (dedup), stage A: normalization, word shingles, exact Jaccard. Your code goes here.
#include "labs/dedup/shingle.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage A): Normalize.
//   1. Reject invalid UTF-8 with InvalidArgument naming the byte offset (U8_NEXT from unicode/utf8.h gives
//      c < 0 on a bad sequence) -- icu::UnicodeString::fromUTF8 would silently replace it.
//   2. NFD with icu::Normalizer2::getNFDInstance(), then walk the code points:
//      drop u_charType(c) == U_NON_SPACING_MARK, drop u_ispunct(c), lowercase with u_tolower(c),
//      turn each run of u_isUWhiteSpace(c) into one ' ' (none at either end).
//   Cases: "Café" -> "cafe"; "  Hello,\tWORLD!\n" -> "hello world"; "" -> ""; "¡¿!?" -> "".
absl::StatusOr<std::string> Normalize(std::string_view text) {
  return distlab::Unimplemented("dedup", "A", "Normalize");
}

// TODO(dedup stage A): WordShingles.
//   1. n < 1 -> InvalidArgument.
//   2. Words are the non-empty pieces between spaces; a shingle is n consecutive words joined by one ' '.
//   3. w >= n words -> w - n + 1 shingles in order; 1 <= w < n -> one shingle of all words; 0 words -> none.
//   Cases: ("a b c d", 2) -> {"a b", "b c", "c d"}; ("a b", 5) -> {"a b"}; ("", 3) -> {}.
absl::StatusOr<std::vector<std::string>> WordShingles(std::string_view normalized, int n) {
  return distlab::Unimplemented("dedup", "A", "WordShingles");
}

// TODO(dedup stage A): HashShingle -- XXH3_64bits(data, size) from xxhash.h.
uint64_t HashShingle(std::string_view shingle) {
  throw distlab::NotImplementedError("dedup", "A", "HashShingle");
}

// TODO(dedup stage A): ShingleSet -- Normalize, WordShingles(n), HashShingle each, sort, remove duplicates.
//   Errors from the steps propagate (n < 1, invalid UTF-8).
absl::StatusOr<std::vector<uint64_t>> ShingleSet(std::string_view text, int n) {
  return distlab::Unimplemented("dedup", "A", "ShingleSet");
}

// TODO(dedup stage A): Jaccard of two sorted, duplicate-free sets.
//   1. Both empty -> 1.0 (identical). One empty -> 0.0.
//   2. One merge pass counts |A ∩ B|; |A ∪ B| = |A| + |B| - |A ∩ B|.
double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  throw distlab::NotImplementedError("dedup", "A", "Jaccard");
}

// TODO(dedup stage A): AllPairsJaccard -- every i < j with Jaccard >= threshold, sorted by (i, j).
std::vector<SimilarPair> AllPairsJaccard(const std::vector<std::vector<uint64_t>>& sets, double threshold) {
  throw distlab::NotImplementedError("dedup", "A", "AllPairsJaccard");
}

}  // namespace distlab::dedup
