// Public tests, Lab 3 stage C: the S-curve, the banding picker, candidates, union-find, the pipeline.
#include "labs/dedup/lsh.h"

#include <cmath>

#include "gtest/gtest.h"
#include "labs/dedup/cluster.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

// b = 20 bands of r = 5 rows at s = 0.5: one band agrees with 0.5^5 = 1/32, so
// Pr[candidate] = 1 - (31/32)^20 ≈ 0.470, and the threshold is (1/20)^(1/5) ≈ 0.549.
TEST(SCurve, MatchesFormula) {
  EXPECT_NEAR(SCurve(0.5, {20, 5}), 1 - std::pow(31.0 / 32.0, 20), 1e-12);
  EXPECT_NEAR(BandingThreshold({20, 5}), std::pow(0.05, 0.2), 1e-12);
}

TEST(PickBanding, HighThresholdFewLongBands) {
  ASSERT_OK_AND_ASSIGN(Banding b, PickBanding(0.9, 128));
  EXPECT_EQ(b.bands, 5);
  EXPECT_EQ(b.rows, 25);
}

// Signatures (k = 4, b = 2 bands of r = 2 rows):
//   doc 0: [1 2 | 3 4]
//   doc 1: [1 2 | 9 9]   band 0 agrees with doc 0 -> candidate (0, 1)
//   doc 2: [7 2 | 3 8]   one row per band is not enough -> no candidate
TEST(CandidatePairs, WholeBandMustAgree) {
  ASSERT_OK_AND_ASSIGN(auto pairs, CandidatePairs({{1, 2, 3, 4}, {1, 2, 9, 9}, {7, 2, 3, 8}}, {2, 2}));
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0], std::make_pair(0, 1));
}

// Three copies of one text (with different spacing and case) and one unrelated text:
//   clusters {0, 1, 3}, survivor 0 (lowest id); doc 2 alone.
TEST(Deduplicate, ExactCopiesFormOneCluster) {
  const std::string text = "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun";
  std::vector<std::string> docs = {
      text, "THE QUICK brown fox jumps over the lazy dog while the cat sleeps in the sun",
      "an entirely different sentence about something else that shares nothing", text + "  "};
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(docs, DedupOptions{}));
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].members, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(r.clusters[0].survivor, 0);
  EXPECT_EQ(r.kept, (std::vector<int>{0, 2}));
}

}  // namespace
}  // namespace distlab::dedup
