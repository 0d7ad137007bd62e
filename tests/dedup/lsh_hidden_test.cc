// Hidden tests, Lab 3 stage C (banding): validation, the S-curve and threshold, the (b, r) picker, candidate
// pairs, and the S-curve measured against the formula.
#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dedup/lsh.h"
#include "labs/dedup/minhash.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

using ::testing::HasSubstr;
using Pairs = std::vector<std::pair<int, int>>;

TEST(ValidateBandingHidden, RejectsImpossibleBandings) {
  EXPECT_OK(ValidateBanding({16, 8}, 128));
  EXPECT_OK(ValidateBanding({5, 25}, 128));  // 125 of 128 rows used: fine
  for (Banding bad : {Banding{17, 8}, Banding{0, 4}, Banding{4, 0}, Banding{-1, 2}, Banding{129, 1}}) {
    const absl::Status s = ValidateBanding(bad, 128);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.bands << " x " << bad.rows;
  }
  EXPECT_THAT(std::string(ValidateBanding({17, 8}, 128).message()), HasSubstr("128"));
}

// 1 - (1 - s^r)^b at a few points, its ends, and its monotonicity (notes: "The S-curve").
TEST(SCurveHidden, FormulaEndsAndMonotone) {
  EXPECT_NEAR(SCurve(0.8, {9, 13}), 1 - std::pow(1 - std::pow(0.8, 13), 9), 1e-12);
  EXPECT_NEAR(SCurve(0.3, {32, 4}), 1 - std::pow(1 - 0.0081, 32), 1e-12);
  EXPECT_NEAR(SCurve(0.6, {1, 1}), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(SCurve(0.0, {20, 5}), 0.0);
  EXPECT_DOUBLE_EQ(SCurve(1.0, {20, 5}), 1.0);
  double prev = 0;
  for (double s = 0.05; s <= 1.0; s += 0.05) {
    EXPECT_GE(SCurve(s, {16, 8}), prev);
    prev = SCurve(s, {16, 8});
  }
}

// (1/b)^(1/r): at that s one band agrees with probability 1/b, so about one band in b agrees.
TEST(BandingThresholdHidden, Formula) {
  EXPECT_NEAR(BandingThreshold({5, 25}), std::pow(0.2, 1.0 / 25), 1e-12);
  EXPECT_NEAR(BandingThreshold({25, 5}), std::pow(0.04, 0.2), 1e-12);
  EXPECT_NEAR(BandingThreshold({1, 7}), 1.0, 1e-12);
}

// The cases of the issue, with equal weights and k = 128.
TEST(PickBandingHidden, KnownOptimaForK128) {
  ASSERT_OK_AND_ASSIGN(Banding high, PickBanding(0.9, 128, 0.5, 0.5));
  EXPECT_EQ(high.bands, 5);
  EXPECT_EQ(high.rows, 25);
  ASSERT_OK_AND_ASSIGN(Banding mid, PickBanding(0.5, 128, 0.5, 0.5));
  EXPECT_EQ(mid.bands, 25);
  EXPECT_EQ(mid.rows, 5);
}

// The picker against a brute-force scan with the same cost, for other thresholds, k and weights.
TEST(PickBandingHidden, MinimisesWeightedAreas) {
  auto cost = [](Banding b, double t, double wfp, double wfn) {
    double fp = 0, fn = 0;
    const int steps = 4000;
    for (int i = 0; i < steps; ++i) {  // midpoint rule, fine enough to rank candidates
      const double s1 = t * (i + 0.5) / steps, s2 = t + (1 - t) * (i + 0.5) / steps;
      fp += SCurve(s1, b) * t / steps;
      fn += (1 - SCurve(s2, b)) * (1 - t) / steps;
    }
    return wfp * fp + wfn * fn;
  };
  for (auto [t, k, wfp, wfn] : std::vector<std::tuple<double, int, double, double>>{
           {0.7, 64, 0.5, 0.5}, {0.8, 128, 0.1, 0.9}, {0.85, 100, 0.9, 0.1}}) {
    ASSERT_OK_AND_ASSIGN(Banding got, PickBanding(t, k, wfp, wfn));
    EXPECT_OK(ValidateBanding(got, k));
    double best = 1e9;
    for (int b = 1; b <= k; ++b)
      for (int r = 1; r <= k / b; ++r) best = std::min(best, cost({b, r}, t, wfp, wfn));
    EXPECT_LE(cost(got, t, wfp, wfn), best + 1e-6)
        << "t " << t << " k " << k << ": picked " << got.bands << " x " << got.rows;
  }
}

// The note's two bandings at t = 0.8, k = 128: equal weights 9 x 13, the tool's (0.05, 0.95) 16 x 8.
TEST(PickBandingHidden, ToolDefaultIs16x8AndEqualWeights9x13) {
  ASSERT_OK_AND_ASSIGN(Banding equal, PickBanding(0.8, 128, 0.5, 0.5));
  EXPECT_EQ(equal.bands, 9);
  EXPECT_EQ(equal.rows, 13);
  ASSERT_OK_AND_ASSIGN(Banding tool, PickBanding(0.8, 128, 0.05, 0.95));
  EXPECT_EQ(tool.bands, 16);
  EXPECT_EQ(tool.rows, 8);
}

// Weighing missed pairs more moves the threshold down: more candidates, fewer misses.
TEST(PickBandingHidden, FalseNegativeWeightLowersThreshold) {
  ASSERT_OK_AND_ASSIGN(Banding equal, PickBanding(0.8, 128, 0.5, 0.5));
  ASSERT_OK_AND_ASSIGN(Banding fn_heavy, PickBanding(0.8, 128, 0.1, 0.9));
  EXPECT_LT(BandingThreshold(fn_heavy), BandingThreshold(equal));
  EXPECT_GT(SCurve(0.8, fn_heavy), SCurve(0.8, equal));
}

TEST(PickBandingHidden, InvalidParameters) {
  for (double t : {0.0, -0.2, 1.5}) {
    EXPECT_EQ(PickBanding(t, 128).status().code(), absl::StatusCode::kInvalidArgument) << t;
  }
  EXPECT_EQ(PickBanding(0.5, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PickBanding(0.5, 128, -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PickBanding(0.5, 128, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(Banding one, PickBanding(1.0, 16));  // threshold 1 is allowed
  EXPECT_OK(ValidateBanding(one, 16));
}

// k = 6, b = 2, r = 3: band 0 = rows 0-2, band 1 = rows 3-5.
//   doc 0: [1 2 3 | 4 5 6]
//   doc 1: [9 9 9 | 4 5 6]   band 1 agrees        -> (0, 1)
//   doc 2: [1 2 7 | 7 5 6]   no whole band agrees -> nothing
//   doc 3: [0 2 3 | 4 0 0]   rows 1-3 agree with doc 0, but they straddle two bands -> nothing
TEST(CandidatePairsHidden, BandsAreConsecutiveRowBlocks) {
  ASSERT_OK_AND_ASSIGN(
      Pairs p, CandidatePairs(
                   {{1, 2, 3, 4, 5, 6}, {9, 9, 9, 4, 5, 6}, {1, 2, 7, 7, 5, 6}, {0, 2, 3, 4, 0, 0}}, {2, 3}));
  EXPECT_EQ(p, (Pairs{{0, 1}}));
}

// Same values in different bands are not a match: doc 1 is doc 0 with its bands swapped.
TEST(CandidatePairsHidden, BandKeysDoNotMatchAcrossBands) {
  ASSERT_OK_AND_ASSIGN(Pairs p, CandidatePairs({{1, 2, 3, 4}, {3, 4, 1, 2}}, {2, 2}));
  EXPECT_TRUE(p.empty());
}

// k = 7 with 2 x 3: row 6 is unused, so agreeing only there is not a candidate.
TEST(CandidatePairsHidden, RowsPastBTimesRAreIgnored) {
  ASSERT_OK_AND_ASSIGN(Pairs p, CandidatePairs({{1, 2, 3, 4, 5, 6, 7}, {0, 0, 0, 0, 0, 0, 7}}, {2, 3}));
  EXPECT_TRUE(p.empty());
}

// Five documents in one bucket of band 0 and some again in band 1: all 10 pairs once each, sorted.
TEST(CandidatePairsHidden, SortedAndEachPairOnce) {
  std::vector<Signature> sigs = {{5, 5, 1}, {5, 5, 1}, {5, 5, 2}, {5, 5, 1}, {5, 5, 3}, {6, 6, 1}};
  ASSERT_OK_AND_ASSIGN(Pairs p, CandidatePairs(sigs, {3, 1}));
  Pairs want;
  for (int i = 0; i < 6; ++i)
    for (int j = i + 1; j < 6; ++j)
      if (i < 5 && j < 5) want.push_back({i, j});
  // doc 5 shares row 2 ("1") with docs 0, 1, 3
  want.push_back({0, 5}), want.push_back({1, 5}), want.push_back({3, 5});
  std::sort(want.begin(), want.end());
  EXPECT_EQ(p, want);
}

TEST(CandidatePairsHidden, ErrorsAndEmptyInput) {
  ASSERT_OK_AND_ASSIGN(Pairs none, CandidatePairs({}, {2, 2}));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(CandidatePairs({{1, 2, 3, 4}, {1, 2, 3}}, {2, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CandidatePairs({{1, 2, 3, 4}, {1, 2, 3, 4}}, {3, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The S-curve measured: for pairs of random sets at exact similarity s, the fraction that becomes a candidate
// under 16 x 8 with k = 128 follows 1 - (1 - s^8)^16 within 4.5 binomial standard deviations (400 pairs per
// point, fixed seeds).
TEST(SCurveHidden, MeasuredCandidateRateFollowsFormula) {
  std::mt19937_64 rng(8);
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(128, 12));
  const Banding banding{16, 8};
  constexpr int kPairs = 400;
  for (int common : {20, 50, 80, 110, 140, 170}) {  // s = common / 200
    std::vector<Signature> sigs;
    for (int p = 0; p < kPairs; ++p) {
      std::vector<uint64_t> a, b;
      for (int i = 0; i < common; ++i) a.push_back(rng()), b.push_back(a.back());
      for (int i = common; i < 100 + common / 2; ++i) a.push_back(rng()), b.push_back(rng());
      sigs.push_back(h.Sign(a)), sigs.push_back(h.Sign(b));
    }
    const double s = static_cast<double>(common) / (200.0);
    ASSERT_OK_AND_ASSIGN(Pairs cands, CandidatePairs(sigs, banding));
    int hits = 0;
    for (auto [i, j] : cands) hits += i % 2 == 0 && j == i + 1;
    const double pred = SCurve(s, banding), sd = std::sqrt(kPairs * pred * (1 - pred)) + 1;
    EXPECT_NEAR(hits, kPairs * pred, 4.5 * sd) << "s = " << s;
  }
}

}  // namespace
}  // namespace distlab::dedup
