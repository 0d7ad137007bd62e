// Lab 3 (dedup), given; not graded: tests of the scale corpus generator and its truth (scale_corpus.h).
#include "labs/dedup/scale_corpus.h"

#include <algorithm>
#include <map>
#include <set>

#include "gtest/gtest.h"
#include "labs/dedup/synthetic.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup::scale {
namespace {

ScaleOptions Small() {
  ScaleOptions o;
  o.documents = 300;
  o.duplicated = 0.5;
  return o;
}

// The permutation puts every family member at exactly one position: each family has one original (target 1)
// and its copies, and family sizes are 1..1 + max_copies.
TEST(ScaleCorpus, EveryFamilyHasOneOriginal) {
  ASSERT_OK_AND_ASSIGN(ScaleCorpus c, ScaleCorpus::Create(Small()));
  std::map<int64_t, std::vector<double>> families;
  for (int64_t p = 0; p < c.size(); ++p) families[c.Family(p)].push_back(c.Target(p));
  int64_t copies = 0;
  for (const auto& [f, targets] : families) {
    // The last family may be cut short, so it may lack its original only if it is the last.
    if (f + 1 < static_cast<int64_t>(families.size())) {
      EXPECT_EQ(std::count(targets.begin(), targets.end(), 1.0), 1) << "family " << f;
    }
    EXPECT_LE(targets.size(), 1u + Small().max_copies);
    copies += static_cast<int64_t>(targets.size()) - 1;
  }
  EXPECT_GT(copies, 0);
}

// A copy's n-gram Jaccard to its original is at most its target, and not far below it: a word edit moves J by
// about 2n / words = 0.05, a swap of two blocks (4 broken joins of n - 1 n-grams) by about 0.15.
TEST(ScaleCorpus, CopiesStopAtTheirTarget) {
  ASSERT_OK_AND_ASSIGN(ScaleCorpus c, ScaleCorpus::Create(Small()));
  std::map<int64_t, int64_t> original;
  for (int64_t p = 0; p < c.size(); ++p) {
    if (c.Target(p) == 1.0) original[c.Family(p)] = p;
  }
  int checked = 0;
  for (int64_t p = 0; p < c.size(); ++p) {
    const double t = c.Target(p);
    if (t == 1.0 || !original.count(c.Family(p))) continue;
    const auto a = c.NgramSet(c.Words(original[c.Family(p)])), b = c.NgramSet(c.Words(p));
    std::vector<uint64_t> common;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
    const double j = static_cast<double>(common.size()) / (a.size() + b.size() - common.size());
    EXPECT_LE(j, t) << "document " << p;
    EXPECT_GT(j, t - 0.2) << "document " << p;
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// Prefix filtering finds exactly the pairs that comparing all pairs finds, at two thresholds, with the
// n-grams cut from the words as strings (not packed).
TEST(TruePairs, EqualAllPairsOnASmallCorpus) {
  ASSERT_OK_AND_ASSIGN(ScaleCorpus c, ScaleCorpus::Create(Small()));
  const std::vector<std::string> vocab = synthetic::Vocabulary(Small().vocabulary, Small().seed);
  std::vector<std::vector<std::string>> words(c.size()), ngrams(c.size());
  for (int64_t p = 0; p < c.size(); ++p) {
    for (uint16_t w : c.Words(p)) words[p].push_back(vocab[w]);
    for (size_t i = 0; i + 5 <= words[p].size(); ++i) {
      ngrams[p].push_back(words[p][i]);
      for (size_t k = 1; k < 5; ++k) ngrams[p].back() += " " + words[p][i + k];
    }
    std::sort(ngrams[p].begin(), ngrams[p].end());
    ngrams[p].erase(std::unique(ngrams[p].begin(), ngrams[p].end()), ngrams[p].end());
  }
  auto jaccard = [&](int64_t i, int64_t j) {
    std::vector<std::string> common;
    std::set_intersection(ngrams[i].begin(), ngrams[i].end(), ngrams[j].begin(), ngrams[j].end(),
                          std::back_inserter(common));
    return static_cast<double>(common.size()) / (ngrams[i].size() + ngrams[j].size() - common.size());
  };
  for (double t : {0.5, 0.8}) {
    std::set<std::pair<int64_t, int64_t>> expected, found;
    for (int64_t i = 0; i < c.size(); ++i) {
      for (int64_t j = i + 1; j < c.size(); ++j) {
        if (jaccard(i, j) >= t) expected.insert({i, j});
      }
    }
    for (const TruePair& p : TruePairs(c, t, 2)) {
      found.insert({p.i, p.j});
      EXPECT_NEAR(p.jaccard, synthetic::WordJaccard(words[p.i], words[p.j], 5), 1e-12);
    }
    EXPECT_EQ(found, expected) << "threshold " << t;
    EXPECT_FALSE(found.empty());
  }
}

TEST(ScaleCorpus, InvalidOptionsNameTheValue) {
  ScaleOptions o = Small();
  o.words = 3;
  EXPECT_NE(ScaleCorpus::Create(o).status().message().find("words = 3"), std::string::npos);
  o = Small();
  o.vocabulary = 70000;
  EXPECT_NE(ScaleCorpus::Create(o).status().message().find("vocabulary = 70000"), std::string::npos);
}

}  // namespace
}  // namespace distlab::dedup::scale
