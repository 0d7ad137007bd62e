// Lab 3 stage A, reference solution: normalization with ICU, word n-grams, exact Jaccard.
//
// Speed: the code points of one or two UTF-8 bytes (ASCII, and the accented Latin, Greek and Cyrillic letters
// around it) are folded through a table made with ICU on first use; ICU decomposes only what the table does
// not hold, up to the next ASCII byte. This gives the bytes of decomposing the whole text (why: Normalize).
// ShingleSet hashes slices of the normalized text instead of making a string per shingle.
#include "labs/dedup/shingle.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"
#include "unicode/utf8.h"
#include "xxhash.h"

namespace distlab::dedup {

namespace {

// What rules 2-5 of shingle.h make of one code point of the decomposed text, in the header's order.
enum class Fate { kDrop, kSpace, kKeep };
Fate FateOf(UChar32 c) {
  if (u_charType(c) == U_NON_SPACING_MARK) return Fate::kDrop;  // the accent of "e" + U+0301
  if (u_ispunct(c)) return Fate::kDrop;
  if (u_isUWhiteSpace(c)) return Fate::kSpace;
  return Fate::kKeep;  // as u_tolower(c)
}

// What the table of Folder::AsciiRun holds for an ASCII byte besides the byte it keeps (FoldTables).
constexpr int16_t kAsciiDrop = -1, kAsciiSpace = -2, kAsciiOther = -3;

// The normalized text, written code point by code point. A run of white space becomes a single ' ' written
// only once a kept code point follows it, so both ends come out trimmed. The buffer is sized once for the
// common case (the output is no longer than the input) and grown only when a code point lengthens the text.
class Folder {
 public:
  explicit Folder(size_t bytes) : out_(bytes + kRoom, '\0') {}

  void CodePoint(UChar32 c) {
    switch (FateOf(c)) {
      case Fate::kDrop:
        return;
      case Fate::kSpace:
        return Space();
      case Fate::kKeep:
        MakeRoom();
        PendingSpace();
        U8_APPEND_UNSAFE(out_.data(), at_, u_tolower(c));
    }
  }
  // A code point folded ahead of time (the table below): its kept bytes, ' ' standing for white space.
  void Folded(const char* bytes, int length) {
    MakeRoom();
    for (int i = 0; i < length; ++i) {
      if (bytes[i] == ' ') {
        Space();
      } else {
        PendingSpace();
        out_[at_++] = bytes[i];
      }
    }
  }
  // The ASCII bytes from bytes[i] up to the next other byte (or `length`), folded through `ascii` (see
  // FoldTables) in a loop that keeps its state in registers; returns where it stopped.
  int32_t AsciiRun(const uint8_t* bytes, int32_t i, int32_t length, const int16_t* ascii) {
    MakeRoom(static_cast<size_t>(length - i) + kRoom);  // a byte writes one byte at most, and a space
    char* out = out_.data();
    size_t at = at_;
    bool pending_space = pending_space_;
    for (; i < length && bytes[i] < 0x80; ++i) {
      const int16_t a = ascii[bytes[i]];
      if (a >= 0) {
        out[at] = ' ';  // without a branch: overwritten unless the space is due
        at += pending_space;
        pending_space = false;
        out[at++] = static_cast<char>(a);
      } else if (a == kAsciiSpace) {
        pending_space = at > 0;
      } else if (a == kAsciiOther) {
        break;
      }
    }
    at_ = at;
    pending_space_ = pending_space;
    return i;
  }
  std::string Take() && {
    out_.resize(at_);
    return std::move(out_);
  }

 private:
  static constexpr size_t kRoom = 16;  // a pending space and the most one code point can add, and more

  void Space() { pending_space_ = at_ > 0; }
  void PendingSpace() {  // as in AsciiRun
    out_[at_] = ' ';
    at_ += pending_space_;
    pending_space_ = false;
  }
  void MakeRoom(size_t bytes = kRoom) {
    if (out_.size() - at_ < bytes) out_.resize(std::max(2 * out_.size(), at_ + bytes));
  }

  std::string out_;
  size_t at_ = 0;  // bytes written
  bool pending_space_ = false;
};

// Tables made with ICU on first use. `folded`: the fold of NFD(c) for every code point of one or two UTF-8
// bytes, U+0000..U+07FF (ASCII, Latin with its accents, Greek, Cyrillic, Armenian, Hebrew, Arabic, the
// combining marks U+0300..U+036F), as the bytes it keeps with ' ' for white space. `simple`: none of the code
// points it keeps has a canonical combining class > 0, so NFD's reordering of marks cannot move them (see
// Normalize); every ASCII code point is simple (Unicode gives none a decomposition or a class > 0, and
// neither ever changes). `ascii`: the same for ASCII, compact for AsciiRun: the byte kept, kAsciiDrop,
// kAsciiSpace, or kAsciiOther for a lowercase outside ASCII (Unicode has none; `folded` handles it).
struct FoldedCodePoint {
  uint8_t length = 0;
  bool simple = false;
  char bytes[6] = {};
};
constexpr UChar32 kTableEnd = 0x800;

struct FoldTables {
  std::vector<FoldedCodePoint> folded;
  int16_t ascii[128];
};

FoldTables MakeFoldTables(const icu::Normalizer2& nfd) {
  FoldTables t;
  t.folded.resize(kTableEnd);
  for (UChar32 c = 0; c < kTableEnd; ++c) {
    UErrorCode error = U_ZERO_ERROR;
    const icu::UnicodeString decomposed = nfd.normalize(icu::UnicodeString(c), error);
    bool simple = U_SUCCESS(error);
    std::string bytes;
    for (int32_t i = 0; i < decomposed.length();) {
      const UChar32 d = decomposed.char32At(i);
      i += U16_LENGTH(d);
      const Fate fate = FateOf(d);
      if (fate != Fate::kDrop && u_getCombiningClass(d) != 0) simple = false;
      if (fate == Fate::kSpace) bytes += ' ';
      if (fate != Fate::kKeep) continue;
      char utf8[U8_MAX_LENGTH];
      int32_t n = 0;
      U8_APPEND_UNSAFE(utf8, n, u_tolower(d));
      bytes.append(utf8, n);
    }
    FoldedCodePoint& f = t.folded[c];
    if (simple && bytes.size() <= sizeof(f.bytes)) {
      f.simple = true;
      f.length = static_cast<uint8_t>(bytes.size());
      std::copy(bytes.begin(), bytes.end(), f.bytes);
    }
    if (c >= 128) continue;
    t.ascii[c] = bytes.empty()                                                ? kAsciiDrop
                 : bytes == " "                                               ? kAsciiSpace
                 : bytes.size() == 1 && static_cast<uint8_t>(bytes[0]) < 0x80 ? bytes[0]
                                                                              : kAsciiOther;
  }
  return t;
}

}  // namespace

absl::StatusOr<std::string> Normalize(std::string_view text) {
  // ICU's UTF-8 conversion silently replaces bad bytes with U+FFFD; a corpus tool should say where they are.
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    if (uint64_t eight; length - i >= 8) {  // eight ASCII bytes at a time: no high bit is set
      std::memcpy(&eight, bytes + i, 8);
      if ((eight & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
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

  // NFD decomposes each code point on its own, then sorts each run of combining marks (canonical combining
  // class > 0) by class; a code point of class 0 never moves and nothing moves across it. So:
  //  - at an ASCII character (class 0, its own decomposition) the text can be cut: NFD(x + a + y) =
  //    NFD(x) + a + NFD(y);
  //  - a code point whose decomposition keeps nothing of class > 0 ("simple" in the table) folds the same
  //    alone as inside NFD(x): whatever the sorting moves around its kept code points is dropped anyway.
  // So each code point of the table that is simple is folded from it, and from the first other code point
  // to the next ASCII byte the text is decomposed by ICU and folded code point by code point. Every kept code
  // point comes out in the order it has in NFD of the whole text.
  static const FoldTables tables = MakeFoldTables(*nfd);
  Folder fold(text.size());
  icu::UnicodeString run, decomposed;
  for (int32_t i = 0; i < length;) {
    const uint8_t lead = bytes[i];
    if (lead < 0x80 && tables.ascii[lead] != kAsciiOther) {
      i = fold.AsciiRun(bytes, i, length, tables.ascii);
      continue;
    }
    // One or two bytes (the text is valid UTF-8, so a lead byte below 0xE0 has one continuation byte).
    const UChar32 c = lead < 0x80 ? lead : lead < 0xE0 ? ((lead & 0x1F) << 6) | (bytes[i + 1] & 0x3F) : -1;
    if (c >= 0 && tables.folded[c].simple) {
      fold.Folded(tables.folded[c].bytes, tables.folded[c].length);
      i += c < 0x80 ? 1 : 2;
      continue;
    }
    const int32_t begin = i++;
    while (i < length && bytes[i] >= 0x80) ++i;
    run = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + begin, i - begin));
    nfd->normalize(run, decomposed, error);
    if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU NFD: ", u_errorName(error)));
    for (int32_t j = 0; j < decomposed.length();) {
      const UChar32 d = decomposed.char32At(j);
      j += U16_LENGTH(d);
      fold.CodePoint(d);
    }
  }
  return std::move(fold).Take();
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

// Sorts the hashes of a set and drops repeats. Hashes are spread evenly over 64 bits, so a counting sort
// on their top bits, with about one bucket per hash, leaves a few hashes in each bucket, and a short
// insertion sort per bucket finishes: linear time, where std::sort takes n log n (this was a ninth of the
// streaming tool's time). A bucket that receives many (repeated shingles) gets std::sort.
void SortUnique(std::vector<uint64_t>& set) {
  const size_t n = set.size();
  if (n < 64) {
    std::sort(set.begin(), set.end());
  } else {
    int bits = 1;
    while ((size_t{1} << bits) < n) ++bits;
    const int shift = 64 - bits;
    std::vector<uint32_t> begin((size_t{1} << bits) + 1, 0);  // bucket x: [begin[x], begin[x + 1])
    for (const uint64_t h : set) ++begin[(h >> shift) + 1];
    for (size_t x = 1; x < begin.size(); ++x) begin[x] += begin[x - 1];
    std::vector<uint64_t> sorted(n);
    {
      std::vector<uint32_t> next(begin.begin(), begin.end() - 1);
      for (const uint64_t h : set) sorted[next[h >> shift]++] = h;
    }
    for (size_t x = 0; x + 1 < begin.size(); ++x) {
      uint64_t* const lo = sorted.data() + begin[x];
      uint64_t* const hi = sorted.data() + begin[x + 1];
      if (hi - lo > 16) {
        std::sort(lo, hi);
        continue;
      }
      for (uint64_t* p = lo + 1; p < hi; ++p) {  // insertion sort
        const uint64_t h = *p;
        uint64_t* q = p;
        for (; q > lo && q[-1] > h; --q) *q = q[-1];
        *q = h;
      }
    }
    set.swap(sorted);
  }
  set.erase(std::unique(set.begin(), set.end()), set.end());
}

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
  SortUnique(set);
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
