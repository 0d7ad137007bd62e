// Lab 3 stage A, reference solution: normalization with ICU, word n-grams, exact Jaccard.
//
// Speed: ASCII bytes, which are most of a web corpus, go through a 128-entry table read off ICU's own
// property functions; only the runs of other characters are decomposed by ICU. The table and the runs give
// the same bytes as normalizing the whole text with ICU (why: Normalize below). ShingleSet hashes slices of
// the normalized text instead of making a string per shingle.
#include "labs/dedup/shingle.h"

#include <algorithm>
#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"
#include "unicode/utf8.h"
#include "xxhash.h"

namespace distlab::dedup {

namespace {

// Rules 2-5 of shingle.h, one code point of the decomposed text at a time, appended to `out` as UTF-8. A
// run of white space becomes a single ' ' written only once a kept code point follows it, so both ends
// come out trimmed.
class Folder {
 public:
  explicit Folder(std::string& out) : out_(out) {}

  void CodePoint(UChar32 c) {
    if (u_charType(c) == U_NON_SPACING_MARK) return;  // the accent of "e" + U+0301
    if (u_ispunct(c)) return;
    if (u_isUWhiteSpace(c)) return Space();
    Keep(u_tolower(c));
  }
  void Space() { pending_space_ = !out_.empty(); }
  void KeepAscii(char c) {
    if (pending_space_) out_.push_back(' ');
    pending_space_ = false;
    out_.push_back(c);
  }
  void Keep(UChar32 c) {
    if (pending_space_) out_.push_back(' ');
    pending_space_ = false;
    char bytes[U8_MAX_LENGTH];
    int32_t length = 0;
    U8_APPEND_UNSAFE(bytes, length, c);
    out_.append(bytes, length);
  }

 private:
  std::string& out_;
  bool pending_space_ = false;
};

// What Folder::CodePoint does with each ASCII code point, asked of ICU once: kDrop, kSpace, or the byte it
// keeps (its lowercase). A code point whose lowercase were not ASCII would be kIcu (sent the slow way);
// Unicode has none, but the table does not have to assume it.
constexpr int16_t kDrop = -1, kSpace = -2, kIcu = -3;
const std::array<int16_t, 128>& AsciiActions() {
  static const std::array<int16_t, 128> table = [] {
    std::array<int16_t, 128> t{};
    for (UChar32 c = 0; c < 128; ++c) {
      if (u_charType(c) == U_NON_SPACING_MARK || u_ispunct(c)) {
        t[c] = kDrop;
      } else if (u_isUWhiteSpace(c)) {
        t[c] = kSpace;
      } else {
        const UChar32 lower = u_tolower(c);
        t[c] = lower < 128 ? static_cast<int16_t>(lower) : kIcu;
      }
    }
    return t;
  }();
  return table;
}

}  // namespace

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

  // NFD decomposes each code point on its own and then reorders only neighbouring combining marks (canonical
  // combining class > 0). An ASCII character decomposes to itself and has class 0, so nothing moves across
  // it: NFD(x + a + y) = NFD(x) + a + NFD(y) for any ASCII a. So the text is cut into ASCII bytes, folded
  // through the table, and runs of other characters, each decomposed by ICU alone and folded code point by
  // code point -- the same code points in the same order as decomposing the whole text.
  const std::array<int16_t, 128>& ascii = AsciiActions();
  std::string result;
  result.reserve(text.size());
  Folder fold(result);
  icu::UnicodeString run, decomposed;
  for (int32_t i = 0; i < length;) {
    if (bytes[i] < 0x80 && ascii[bytes[i]] != kIcu) {
      const int16_t action = ascii[bytes[i++]];
      if (action == kSpace) {
        fold.Space();
      } else if (action != kDrop) {
        fold.KeepAscii(static_cast<char>(action));
      }
      continue;
    }
    const int32_t begin = i;
    while (i < length && (bytes[i] >= 0x80 || ascii[bytes[i]] == kIcu)) ++i;
    run = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + begin, i - begin));
    nfd->normalize(run, decomposed, error);
    if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU NFD: ", u_errorName(error)));
    for (int32_t j = 0; j < decomposed.length();) {
      const UChar32 c = decomposed.char32At(j);
      j += U16_LENGTH(c);
      fold.CodePoint(c);
    }
  }
  return result;
}

namespace {

// The shingles of a normalized text as slices of it, without copying: WordShingles copies them, ShingleSet
// hashes them where they lie. Shingle s runs from the start of word s to the end of word s + n - 1, so the
// single spaces between words come along for free; a text of 1 <= w < n words has the one shingle of all
// its words.
class Windows {
 public:
  Windows(std::string_view normalized, int n) : text_(normalized), n_(n) {
    // Word boundaries as [begin, end) offsets.
    size_t i = 0;
    while (i < normalized.size()) {
      while (i < normalized.size() && normalized[i] == ' ') ++i;
      const size_t begin = i;
      while (i < normalized.size() && normalized[i] != ' ') ++i;
      if (i > begin) words_.emplace_back(begin, i);
    }
  }
  size_t size() const {
    if (words_.empty()) return 0;
    return words_.size() < static_cast<size_t>(n_) ? 1 : words_.size() - n_ + 1;
  }
  std::string_view operator[](size_t s) const {
    const size_t last = std::min(s + n_ - 1, words_.size() - 1);
    return text_.substr(words_[s].first, words_[last].second - words_[s].first);
  }

 private:
  std::string_view text_;
  int n_;
  std::vector<std::pair<size_t, size_t>> words_;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> WordShingles(std::string_view normalized, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("n-gram size n = ", n, ": n must be >= 1"));
  const Windows windows(normalized, n);
  std::vector<std::string> shingles;
  shingles.reserve(windows.size());
  for (size_t s = 0; s < windows.size(); ++s) shingles.emplace_back(windows[s]);
  return shingles;
}

uint64_t HashShingle(std::string_view shingle) { return XXH3_64bits(shingle.data(), shingle.size()); }

absl::StatusOr<std::vector<uint64_t>> ShingleSet(std::string_view text, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("n-gram size n = ", n, ": n must be >= 1"));
  absl::StatusOr<std::string> normalized = Normalize(text);
  if (!normalized.ok()) return normalized.status();
  const Windows windows(*normalized, n);  // the shingles of WordShingles, hashed where they lie
  std::vector<uint64_t> set;
  set.reserve(windows.size());
  for (size_t s = 0; s < windows.size(); ++s) set.push_back(HashShingle(windows[s]));
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
