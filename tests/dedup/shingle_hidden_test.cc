// Hidden tests, Lab 3 stage A: normalization, word shingles, hashing, exact Jaccard, all-pairs ground truth.
#include <algorithm>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dedup/shingle.h"
#include "tools/testing/test_support.h"
#include "xxhash.h"

namespace distlab::dedup {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string N(std::string_view s) {
  absl::StatusOr<std::string> r = Normalize(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "<error>";
}

// Precomposed "é" (U+00E9) and decomposed "e" + U+0301 both end as "e": NFD first, then marks go.
TEST(NormalizeHidden, PrecomposedAndDecomposedAccents) {
  EXPECT_EQ(N("caf\xC3\xA9"), "cafe");
  EXPECT_EQ(N("cafe\xCC\x81"), "cafe");
  EXPECT_EQ(N("Se\xC3\xB1or \xC3\x9C"
              "ber Na\xC3\xAFve"),
            "senor uber naive");
}

// Lowercasing is Unicode-wide, not ASCII only: "ÉCOLE" -> "ecole", "ΑΘΗΝΑ" -> "αθηνα".
TEST(NormalizeHidden, UnicodeLowercase) {
  EXPECT_EQ(N("\xC3\x89"
              "COLE"),
            "ecole");
  EXPECT_EQ(N("\xCE\x91\xCE\x98\xCE\x97\xCE\x9D\xCE\x91"), "\xCE\xB1\xCE\xB8\xCE\xB7\xCE\xBD\xCE\xB1");
}

// Punctuation (P*: ASCII and Unicode quotes, dashes, «») is deleted; symbols (+, =, $) are not punctuation.
TEST(NormalizeHidden, PunctuationDeletedSymbolsKept) {
  EXPECT_EQ(N("don't stop!"), "dont stop");
  EXPECT_EQ(N("\xE2\x80\x9CQuoted\xE2\x80\x9D \xC2\xABword\xC2\xBB \xE2\x80\x94 end."), "quoted word end");
  EXPECT_EQ(N("a + b = $c"), "a + b = $c");
}

// Runs of any Unicode white space (tab, newline, no-break space U+00A0, ideographic space U+3000) become one
// ' '; both ends are trimmed; a text of only spaces and punctuation is empty.
TEST(NormalizeHidden, WhitespaceCollapsedAndTrimmed) {
  EXPECT_EQ(N(" \t one\n\n two\xC2\xA0three\xE3\x80\x80"
              "four  "),
            "one two three four");
  EXPECT_EQ(N(" ... !!! "), "");
  EXPECT_EQ(N(""), "");
}

TEST(NormalizeHidden, InvalidUtf8IsAnError) {
  absl::StatusOr<std::string> r = Normalize("abc\xC3(def");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("3"));  // the byte offset
}

// shingle.h: the 0-based offset of the first byte of the ill-formed sequence, in the stated message.
TEST(NormalizeHidden, InvalidUtf8OffsetIsTheSequenceStart) {
  const std::pair<std::string, int> cases[] = {
      {"abc\xC3(def", 3},    // a 2-byte lead broken by '('
      {"ab\xE2\x82(cd", 2},  // a 3-byte sequence cut after its second byte
      {"\x80"
       "abc",
       0},                       // a continuation byte without a lead
      {"ok \xF0\x9F\x98", 3},    // a 4-byte sequence truncated at the end
      {"\xC3\xA9\xC0\x80x", 2},  // after a valid 'e acute', an overlong encoding
  };
  for (const auto& [text, offset] : cases) {
    absl::StatusOr<std::string> r = Normalize(text);
    ASSERT_FALSE(r.ok()) << offset;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              "invalid UTF-8 at byte offset " + std::to_string(offset) + ": Normalize takes UTF-8 text");
  }
}

TEST(WordShinglesHidden, WindowsOfWordsNotCharacters) {
  ASSERT_OK_AND_ASSIGN(auto s, WordShingles("alpha beta gamma delta epsilon zeta eta", 5));
  EXPECT_THAT(s, ElementsAre("alpha beta gamma delta epsilon", "beta gamma delta epsilon zeta",
                             "gamma delta epsilon zeta eta"));
  ASSERT_OK_AND_ASSIGN(auto one, WordShingles("x yy zzz", 1));
  EXPECT_THAT(one, ElementsAre("x", "yy", "zzz"));
}

// Duplicated windows stay in the list (the set is made later); exactly n words give one shingle.
TEST(WordShinglesHidden, DuplicatesKeptAndExactLength) {
  ASSERT_OK_AND_ASSIGN(auto dup, WordShingles("a a a a", 2));
  EXPECT_THAT(dup, ElementsAre("a a", "a a", "a a"));
  ASSERT_OK_AND_ASSIGN(auto exact, WordShingles("one two three", 3));
  EXPECT_THAT(exact, ElementsAre("one two three"));
}

// Fewer words than n: one shingle of what there is; no words: none.
TEST(WordShinglesHidden, ShortAndEmptyDocuments) {
  ASSERT_OK_AND_ASSIGN(auto short_doc, WordShingles("just four words here", 5));
  EXPECT_THAT(short_doc, ElementsAre("just four words here"));
  ASSERT_OK_AND_ASSIGN(auto single, WordShingles("word", 13));
  EXPECT_THAT(single, ElementsAre("word"));
  ASSERT_OK_AND_ASSIGN(auto empty, WordShingles("", 5));
  EXPECT_TRUE(empty.empty());
}

TEST(WordShinglesHidden, NonPositiveNIsAnError) {
  EXPECT_EQ(WordShingles("a b", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WordShingles("a b", -3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShingleSet("a b", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HashShingleHidden, IsXxh3OfTheBytes) {
  for (std::string s : {"", "a", "the quick brown fox jumps", "\xC3\xA9t\xC3\xA9"}) {
    EXPECT_EQ(HashShingle(s), XXH3_64bits(s.data(), s.size())) << s;
  }
}

// ShingleSet = sorted, duplicate-free hashes of the normalized text's word shingles.
TEST(ShingleSetHidden, SortedUniqueHashesOfNormalizedShingles) {
  ASSERT_OK_AND_ASSIGN(auto set, ShingleSet("A b, c; A b c!", 2));
  // normalized "a b c a b c" -> {"a b", "b c", "c a"} (the second "a b", "b c" repeat)
  std::vector<uint64_t> want;
  for (std::string s : {"a b", "b c", "c a"}) want.push_back(XXH3_64bits(s.data(), s.size()));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(set, want);
}

// Two renderings of one text that differ only in case, accents, punctuation and spacing have one set.
TEST(ShingleSetHidden, NormalizationMakesNoisyCopiesEqual) {
  ASSERT_OK_AND_ASSIGN(
      auto a, ShingleSet("Th\xC3\xA9 r\xC3\xA9sum\xC3\xA9 was sent, to the Caf\xC3\xA9 owner today."));
  ASSERT_OK_AND_ASSIGN(auto b, ShingleSet("the resume   was sent to the\ncafe owner today"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 5u);  // 9 words, n = 5
  EXPECT_EQ(ShingleSet("ok \xFF").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JaccardHidden, HandExamplesAndConventions) {
  EXPECT_DOUBLE_EQ(Jaccard({1, 2, 3}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(Jaccard({1, 2, 3}, {4, 5}), 0.0);
  EXPECT_DOUBLE_EQ(Jaccard({}, {}), 1.0);
  EXPECT_DOUBLE_EQ(Jaccard({}, {7}), 0.0);
  EXPECT_DOUBLE_EQ(Jaccard({1, 5, 9, 13}, {2, 5, 13, 20, 30}), 2.0 / 7.0);
  EXPECT_DOUBLE_EQ(Jaccard({2, 5, 13, 20, 30}, {1, 5, 9, 13}), 2.0 / 7.0);
}

// Against sets built with std::set over random small universes (sorted inputs, many overlaps).
TEST(JaccardHidden, MatchesSetArithmetic) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::set<uint64_t> a, b;
    for (int i = 0; i < 30; ++i) a.insert(rng() % 50), b.insert(rng() % 50);
    std::set<uint64_t> all = a;
    all.insert(b.begin(), b.end());
    const double want = static_cast<double>(a.size() + b.size() - all.size()) / all.size();
    EXPECT_DOUBLE_EQ(Jaccard({a.begin(), a.end()}, {b.begin(), b.end()}), want);
  }
}

// Every pair at or above the threshold, in (i, j) order; a pair exactly at the threshold counts.
TEST(AllPairsJaccardHidden, EveryPairAtOrAboveThreshold) {
  const std::vector<std::vector<uint64_t>> sets = {
      {1, 2, 3, 4}, {1, 2, 3, 5}, {9}, {1, 2, 3, 4}, {2, 3, 4, 5}};
  const auto pairs = AllPairsJaccard(sets, 0.6);
  std::vector<std::tuple<int, int, double>> got;
  for (const auto& p : pairs) got.emplace_back(p.i, p.j, p.jaccard);
  EXPECT_THAT(
      got, ElementsAre(std::make_tuple(0, 1, 0.6), std::make_tuple(0, 3, 1.0), std::make_tuple(0, 4, 0.6),
                       std::make_tuple(1, 3, 0.6), std::make_tuple(1, 4, 0.6), std::make_tuple(3, 4, 0.6)));
  EXPECT_TRUE(AllPairsJaccard(sets, 1.0).size() == 1);
}

}  // namespace
}  // namespace distlab::dedup
