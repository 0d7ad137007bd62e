// Public tests, Lab 3 stage C (banding): validation, the S-curve, the threshold, the picker, candidates.
#include "labs/dedup/lsh.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

// k = 128: 16 x 8 uses all 128 rows, 5 x 25 uses 125 (rows 125-127 unused), 17 x 8 would need 136.
TEST(ValidateBanding, BandsTimesRowsAtMostK) {
  EXPECT_OK(ValidateBanding({16, 8}, 128));
  EXPECT_OK(ValidateBanding({5, 25}, 128));
  EXPECT_EQ(ValidateBanding({17, 8}, 128).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateBanding({0, 8}, 128).code(), absl::StatusCode::kInvalidArgument);
}

// b = 20 bands of r = 5 rows at s = 0.5 (notes/03-dedup.md §3.1, the exercise):
//   one given band agrees      0.5^5            = 1/32
//   it does not                1 - 1/32         = 31/32
//   no band of 20 agrees       (31/32)^20       ≈ 0.530
//   candidate                  1 - (31/32)^20   ≈ 0.470
// and the ends: s = 0 is never a candidate, s = 1 always.
TEST(SCurve, MatchesFormula) {
  EXPECT_NEAR(SCurve(0.5, {20, 5}), 1 - std::pow(31.0 / 32.0, 20), 1e-12);
  EXPECT_DOUBLE_EQ(SCurve(0.0, {20, 5}), 0.0);
  EXPECT_DOUBLE_EQ(SCurve(1.0, {20, 5}), 1.0);
}

// 20 x 5 (notes/03-dedup.md §3.2, the exercise): one band agrees with probability 1/20 at s^5 = 1/20,
//   t = (1/20)^(1/5) = 0.05^0.2 ≈ 0.549;   1 x 7: one band is all there is, t = 1.
TEST(BandingThreshold, OneBandInBAgrees) {
  EXPECT_NEAR(BandingThreshold({20, 5}), std::pow(0.05, 0.2), 1e-12);
  EXPECT_NEAR(BandingThreshold({1, 7}), 1.0, 1e-12);
}

// t = 0.9, k = 128, equal weights: cost = 0.5 FP + 0.5 FN (notes/03-dedup.md §3.3). A few rows of the scan:
//   b x r      (1/b)^(1/r)   FP = ∫_0^t P    FN = ∫_t^1 (1 - P)   cost
//   4 x 32     0.958         0.00365         0.04126              0.02246
//   5 x 24     0.935         0.01325         0.02363              0.018439
//   5 x 25     0.938         0.01156         0.02532              0.018438   <- the least of all b r <= 128
//   6 x 21     0.918         0.02345         0.01480              0.01912
//   16 x 8     0.707         0.23697         0.00000              0.11849
// Few long bands: a high threshold wants the step far to the right.
TEST(PickBanding, HighThresholdFewLongBands) {
  ASSERT_OK_AND_ASSIGN(Banding b, PickBanding(0.9, 128));
  EXPECT_EQ(b.bands, 5);
  EXPECT_EQ(b.rows, 25);
}

// Signatures (k = 4, b = 2 bands of r = 2 rows: band 0 = rows 0-1, band 1 = rows 2-3):
//            band 0   band 1
//   doc 0:   [1 2 |   3 4]
//   doc 1:   [1 2 |   9 9]   band 0 equal to doc 0's band 0 -> candidate (0, 1)
//   doc 2:   [7 2 |   3 8]   one row per band is not a band -> no candidate
TEST(CandidatePairs, WholeBandMustAgree) {
  ASSERT_OK_AND_ASSIGN(auto pairs, CandidatePairs({{1, 2, 3, 4}, {1, 2, 9, 9}, {7, 2, 3, 8}}, {2, 2}));
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0], std::make_pair(0, 1));
}

// Three equal signatures agree on both bands: each pair once, sorted -> (0, 1) (0, 2) (1, 2). k = 5 with
// 2 x 2 leaves row 4 unused: doc 3 agrees with the others only there -> in no pair.
TEST(CandidatePairs, SortedEachPairOnce) {
  ASSERT_OK_AND_ASSIGN(
      auto pairs,
      CandidatePairs({{1, 2, 3, 4, 0}, {1, 2, 3, 4, 0}, {1, 2, 3, 4, 0}, {5, 6, 7, 8, 0}}, {2, 2}));
  EXPECT_EQ(pairs, (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}}));
  EXPECT_EQ(CandidatePairs({{1, 2, 3, 4}, {1, 2, 3}}, {1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Drawn signatures (5 to 12 documents, b in 2..5, r in 1..4, k = b r + 0..2 rows, values in {0, 1, 2} so that
// bands often agree) against a brute force that compares every pair's rows band by band (the grading seed
// draws them: bazel test //labs/dedup:lsh_test --test_env=DISTLAB_GRADING_SEED=S draws what seed S draws).
TEST(CandidatePairs, DrawnSignaturesMatchABruteForce) {
  distlab::testing::CaseRandom rng;
  const Banding banding{static_cast<int>(rng.Int(2, 5)), static_cast<int>(rng.Int(1, 4))};
  const int k = banding.bands * banding.rows + static_cast<int>(rng.Int(0, 2));
  std::vector<Signature> sigs(rng.Int(5, 12), Signature(k));
  std::string drawn;
  for (auto& sig : sigs) {
    drawn += " [";
    for (auto& x : sig) x = rng.Int(0, 2), drawn += std::to_string(x);
    drawn += "]";
  }
  SCOPED_TRACE("banding " + std::to_string(banding.bands) + " x " + std::to_string(banding.rows) +
               ", signatures" + drawn + "; " + distlab::testing::SeedNote());
  std::vector<std::pair<int, int>> want;
  for (int i = 0; i < static_cast<int>(sigs.size()); ++i) {
    for (int j = i + 1; j < static_cast<int>(sigs.size()); ++j) {
      bool candidate = false;
      for (int band = 0; band < banding.bands && !candidate; ++band) {
        const int first = band * banding.rows;
        candidate = std::equal(sigs[i].begin() + first, sigs[i].begin() + first + banding.rows,
                               sigs[j].begin() + first);
      }
      if (candidate) want.push_back({i, j});
    }
  }
  ASSERT_OK_AND_ASSIGN(auto got, CandidatePairs(sigs, banding));
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace distlab::dedup
