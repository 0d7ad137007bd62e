// Shared by the hidden Lab 3 tests: what seeded cases need to draw text, sets and corpora, an independent
// reference of the pipeline (word shingles, the MinHash family of minhash.h, banding, exact Jaccard), and
// short descriptions of a drawn input for failure messages.
//
// Most cases draw their inputs (texts, accents, white space, invalid byte sequences, sets and their overlaps,
// hash seeds, bandings, signatures, union sequences, planted corpora, file names and contents) from a
// distlab::testing::CaseRandom, so each grading checks other inputs (tools/testing/test_support.h). Such a
// case opens with SCOPED_TRACE(Drawn(...)): every failure in it then ends with the drawn input and
// testing::SeedNote(). Its assertions say which property failed and show the input that broke it (small
// enough to redo by hand), never a whole expected list.
#ifndef DISTLAB_TESTS_DEDUP_TEST_UTIL_H_
#define DISTLAB_TESTS_DEDUP_TEST_UTIL_H_

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "labs/dedup/minhash.h"
#include "tools/testing/test_support.h"
#include "xxhash.h"

namespace distlab::dedup::testutil {

using ::distlab::testing::CaseRandom;

// "<input>; grading seed S; to draw the same inputs: ..." -- the trace a seeded case opens with.
inline std::string Drawn(const std::string& input) { return input + "; " + distlab::testing::SeedNote(); }

// A byte string as a C string literal: printable ASCII as it is, everything else as \xHH ("caf\xC3\xA9"),
// so that a failing input can be pasted into a test. Longer than `max` bytes: the first `max`, then "...".
inline std::string Quote(std::string_view s, size_t max = 400) {
  std::string out = "\"";
  bool after_hex = false;  // "\xC3" "a": a hex escape followed by a hex digit needs a break
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      if (after_hex && std::isxdigit(c)) out += "\" \"";
      out += static_cast<char>(c);
      after_hex = false;
    } else if (c == '"' || c == '\\') {
      out += '\\', out += static_cast<char>(c);
      after_hex = false;
    } else if (c == '\n') {
      out += "\\n", after_hex = false;
    } else if (c == '\t') {
      out += "\\t", after_hex = false;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
      after_hex = true;
    }
  }
  out += '"';
  if (s.size() > max) out += absl::StrCat("... (", s.size(), " bytes)");
  return out;
}

// The UTF-8 bytes of one code point.
inline std::string Utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// "{3, 9, 12}" (at most `max` elements, then "... (n in all)").
template <typename T>
std::string List(const std::vector<T>& v, size_t max = 40) {
  std::ostringstream out;
  out << '{';
  for (size_t i = 0; i < v.size() && i < max; ++i) out << (i ? ", " : "") << +v[i];
  if (v.size() > max) out << ", ... (" << v.size() << " in all)";
  out << '}';
  return out.str();
}

// The whole numbers a message names, in order ("b = 17 bands x r = -2 rows with k = 128" -> 17, -2, 128).
inline std::vector<int64_t> Numbers(std::string_view message) {
  std::vector<int64_t> out;
  auto digit = [&](size_t i) {
    return i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]));
  };
  for (size_t i = 0; i < message.size();) {
    const bool minus = message[i] == '-' && digit(i + 1);
    if (!minus && !digit(i)) {
      ++i;
      continue;
    }
    size_t j = i + (minus ? 1 : 0);
    int64_t v = 0;
    for (; digit(j); ++j) v = v * 10 + (message[j] - '0');
    out.push_back(minus ? -v : v);
    i = j;
  }
  return out;
}

// A random lowercase ASCII word of [lo, hi] letters.
inline std::string Word(CaseRandom& rng, int lo, int hi) {
  std::string w;
  for (int i = static_cast<int>(rng.Int(lo, hi)); i > 0; --i) w += static_cast<char>('a' + rng.Int(0, 25));
  return w;
}

// `count` distinct random lowercase words of [lo, hi] letters.
inline std::vector<std::string> DistinctWords(CaseRandom& rng, int count, int lo, int hi) {
  std::vector<std::string> words;
  while (static_cast<int>(words.size()) < count) {
    std::string w = Word(rng, lo, hi);
    if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(std::move(w));
  }
  return words;
}

inline std::string Join(const std::vector<std::string>& words, size_t from = 0,
                        size_t to = std::string::npos) {
  std::string out;
  for (size_t i = from; i < words.size() && i < to; ++i) out += (i > from ? " " : "") + words[i];
  return out;
}

// The reference word n-grams of already canonical words (shingle.h's rule: w >= n gives w - n + 1 windows,
// 1 <= w < n one shingle of all the words, none for no words), as strings.
inline std::vector<std::string> NGrams(const std::vector<std::string>& words, int n) {
  std::vector<std::string> out;
  if (words.empty()) return out;
  if (static_cast<int>(words.size()) < n) return {Join(words)};
  for (size_t i = 0; i + n <= words.size(); ++i) out.push_back(Join(words, i, i + n));
  return out;
}

inline uint64_t Xxh3(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

// The reference shingle set: XXH3 of each n-gram, sorted, without repeats.
inline std::vector<uint64_t> ReferenceSet(const std::vector<std::string>& words, int n) {
  std::vector<uint64_t> set;
  for (const std::string& g : NGrams(words, n)) set.push_back(Xxh3(g));
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

// Exact Jaccard of two sorted, duplicate-free sets, computed here (shingle.h's conventions).
inline double ExactJaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  std::vector<uint64_t> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  return static_cast<double>(common.size()) / static_cast<double>(a.size() + b.size() - common.size());
}

// The MinHash family of minhash.h computed here from its definition: the coefficients off one SplitMix64
// stream (SplitMix64Next is the header's own inline function) and sig[i] = min of a_i x + b_i.
struct ReferenceFamily {
  std::vector<uint64_t> a, b;
  ReferenceFamily(int k, uint64_t seed) {
    uint64_t state = seed;
    for (int i = 0; i < k; ++i) {
      a.push_back(SplitMix64Next(state) | 1);
      b.push_back(SplitMix64Next(state));
    }
  }
  Signature Sign(const std::vector<uint64_t>& set) const {
    Signature sig(a.size(), kEmptyMin);
    for (uint64_t x : set) {
      for (size_t i = 0; i < a.size(); ++i) sig[i] = std::min(sig[i], a[i] * x + b[i]);
    }
    return sig;
  }
};

// Reference candidate pairs (lsh.h's vocabulary): (i, j), i < j, equal on all rows of at least one band.
// Grouping by the band's values (a map of vectors), not by a hash, so nothing can collide.
inline std::vector<std::pair<int, int>> ReferenceCandidates(const std::vector<Signature>& sigs, int bands,
                                                            int rows) {
  std::vector<std::pair<int, int>> pairs;
  for (int j = 0; j < bands; ++j) {
    std::map<std::vector<uint64_t>, std::vector<int>> buckets;
    for (int d = 0; d < static_cast<int>(sigs.size()); ++d) {
      buckets[std::vector<uint64_t>(sigs[d].begin() + j * rows, sigs[d].begin() + (j + 1) * rows)].push_back(
          d);
    }
    for (const auto& [key, docs] : buckets) {
      for (size_t x = 0; x < docs.size(); ++x)
        for (size_t y = x + 1; y < docs.size(); ++y) pairs.push_back({docs[x], docs[y]});
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

// Connected components (two or more members, each sorted, in order of the smallest member) of the graph on
// 0..n-1 whose edges are `pairs`, by relabelling (no union-find).
inline std::vector<std::vector<int>> Components(int n, const std::vector<std::pair<int, int>>& pairs) {
  std::vector<int> label(n);
  std::iota(label.begin(), label.end(), 0);
  for (const auto& [i, j] : pairs) {
    const int from = std::max(label[i], label[j]), to = std::min(label[i], label[j]);
    if (from == to) continue;
    for (int& l : label) l = l == from ? to : l;
  }
  std::vector<std::vector<int>> by_label(n);
  for (int d = 0; d < n; ++d) by_label[label[d]].push_back(d);
  std::vector<std::vector<int>> out;
  for (auto& members : by_label) {
    if (members.size() >= 2) out.push_back(std::move(members));
  }
  return out;  // label = smallest member, so already in order of the smallest member
}

}  // namespace distlab::dedup::testutil

// EXPECT_PROPERTY(cond) << "what failed, on which input": a failure that prints only the message (not the
// condition's text and "Actual: false"), for checks whose message already says everything.
#define EXPECT_PROPERTY(cond) \
  if (cond) {                 \
  } else                      \
    ADD_FAILURE()

#endif  // DISTLAB_TESTS_DEDUP_TEST_UTIL_H_
