// MUTANT (char_ngrams): n-grams over characters instead of words.
// Lab 3 stage A, reference solution: normalization with ICU, word n-grams, exact Jaccard.
#include "labs/dedup/shingle.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"
#include "unicode/utf8.h"
#include "xxhash.h"

namespace distlab::dedup {

absl::StatusOr<std::string> Normalize(std::string_view text) {
  // ICU's UTF-8 conversion silently replaces bad bytes with U+FFFD; a corpus tool should say where they are.
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    if (c < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid UTF-8 at byte offset ", start, ": Normalize takes UTF-8 text"));
    }
  }
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(error);
  if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU NFD: ", u_errorName(error)));
  const icu::UnicodeString decomposed =
      nfd->normalize(icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), length)), error);
  if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU NFD: ", u_errorName(error)));

  // One pass over the code points: drop marks and punctuation, lowercase, and write a single ' ' for a run
  // of white space only once a word follows it (so both ends come out trimmed).
  icu::UnicodeString out;
  bool pending_space = false;
  for (int32_t i = 0; i < decomposed.length();) {
    UChar32 c = decomposed.char32At(i);
    i += U16_LENGTH(c);
    if (u_charType(c) == U_NON_SPACING_MARK) continue;  // the accent of "e" + U+0301
    if (u_ispunct(c)) continue;
    if (u_isUWhiteSpace(c)) {
      pending_space = !out.isEmpty();
      continue;
    }
    if (pending_space) out.append(static_cast<UChar>(' '));
    pending_space = false;
    out.append(u_tolower(c));
  }
  std::string result;
  out.toUTF8String(result);
  return result;
}

absl::StatusOr<std::vector<std::string>> WordShingles(std::string_view normalized, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("n-gram size n = ", n, ": n must be >= 1"));
  // Word boundaries as [begin, end) offsets; the shingles are slices from the first word's begin to the
  // last word's end, so the single spaces between words come along for free.
  std::vector<std::pair<size_t, size_t>> words;
  for (size_t i = 0; i < normalized.size(); ++i) words.emplace_back(i, i + 1);  // characters, not words
  std::vector<std::string> shingles;
  if (words.empty()) return shingles;
  if (static_cast<int>(words.size()) < n) {  // short document: one shingle of everything it has
    shingles.emplace_back(normalized.substr(words.front().first, words.back().second - words.front().first));
    return shingles;
  }
  shingles.reserve(words.size() - n + 1);
  for (size_t w = 0; w + n <= words.size(); ++w) {
    const size_t begin = words[w].first;
    const size_t end = words[w + n - 1].second;
    shingles.emplace_back(normalized.substr(begin, end - begin));
  }
  return shingles;
}

uint64_t HashShingle(std::string_view shingle) { return XXH3_64bits(shingle.data(), shingle.size()); }

absl::StatusOr<std::vector<uint64_t>> ShingleSet(std::string_view text, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("n-gram size n = ", n, ": n must be >= 1"));
  absl::StatusOr<std::string> normalized = Normalize(text);
  if (!normalized.ok()) return normalized.status();
  absl::StatusOr<std::vector<std::string>> shingles = WordShingles(*normalized, n);
  if (!shingles.ok()) return shingles.status();
  std::vector<uint64_t> set;
  set.reserve(shingles->size());
  for (const std::string& s : *shingles) set.push_back(HashShingle(s));
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  // Both sorted: one merge pass counts the intersection; |A ∪ B| = |A| + |B| - |A ∩ B|.
  size_t i = 0, j = 0, common = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++common, ++i, ++j;
    }
  }
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

std::vector<SimilarPair> AllPairsJaccard(const std::vector<std::vector<uint64_t>>& sets, double threshold) {
  std::vector<SimilarPair> pairs;
  const int n = static_cast<int>(sets.size());
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const double jac = Jaccard(sets[i], sets[j]);
      if (jac >= threshold) pairs.push_back({i, j, jac});
    }
  }
  return pairs;
}

}  // namespace distlab::dedup
