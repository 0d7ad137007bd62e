// Lab 3 (dedup), stage A: normalization, word shingles, exact Jaccard. Your code goes here.
#include "labs/dedup/shingle.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage A): Normalize -- contract: shingle.h (Normalize); idea: notes/03-dedup.md §1.1.
//   ICU: U8_NEXT (unicode/utf8.h) moves its index past one sequence and yields c < 0 when it is ill-formed;
//   icu::Normalizer2 (unicode/normalizer2.h); u_charType, u_ispunct, u_isUWhiteSpace, u_tolower (uchar.h).
//   icu::UnicodeString::fromUTF8 turns bad bytes into U+FFFD without a word.
//   Which rules need the whole text at once, and which can one pass over the code points apply?
absl::StatusOr<std::string> Normalize(std::string_view text) {
  return distlab::Unimplemented("dedup", "A", "Normalize");
}

// TODO(dedup stage A): WordShingles -- contract: shingle.h (WordShingles); idea: notes/03-dedup.md §1.2.
//   The shingles are new strings: the caller's `normalized` view may not outlive the call.
//   How many shingles does a text of w words have, and what does the header ask when that count is < 1?
absl::StatusOr<std::vector<std::string>> WordShingles(std::string_view normalized, int n) {
  return distlab::Unimplemented("dedup", "A", "WordShingles");
}

// TODO(dedup stage A): HashShingle -- contract: shingle.h (HashShingle). xxhash.h is linked.
uint64_t HashShingle(std::string_view shingle) {
  throw distlab::NotImplementedError("dedup", "A", "HashShingle");
}

// TODO(dedup stage A): ShingleSet -- contract: shingle.h (ShingleSet); idea: notes/03-dedup.md §1.2.
//   The errors of the functions it builds on reach the caller unchanged.
absl::StatusOr<std::vector<uint64_t>> ShingleSet(std::string_view text, int n) {
  return distlab::Unimplemented("dedup", "A", "ShingleSet");
}

// TODO(dedup stage A): Jaccard -- contract: shingle.h (Jaccard); idea: notes/03-dedup.md §1.3.
//   Both inputs are sorted and duplicate-free. What does that buy you over a hash set?
double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  throw distlab::NotImplementedError("dedup", "A", "Jaccard");
}

// TODO(dedup stage A): AllPairsJaccard -- contract: shingle.h (AllPairsJaccard);
//   idea: notes/03-dedup.md §1.3.
std::vector<SimilarPair> AllPairsJaccard(const std::vector<std::vector<uint64_t>>& sets, double threshold) {
  throw distlab::NotImplementedError("dedup", "A", "AllPairsJaccard");
}

}  // namespace distlab::dedup
