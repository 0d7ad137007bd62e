// Hidden tests, Lab 3 stage C (banding): validation, the S-curve and threshold, the (b, r) picker, candidate
// pairs, and the S-curve measured against the formula.
//
// Most cases draw their k, bandings, similarities, thresholds, weights and signatures from a CaseRandom
// (test_util.h). Fixed: the picker's optima stated in notes/03-dedup.md §3.3 (KnownOptimaForK128,
// ToolDefaultIs16x8AndEqualWeights9x13). Candidate pairs are checked against a brute force that compares
// the rows of every band directly.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dedup/lsh.h"
#include "labs/dedup/minhash.h"
#include "tests/dedup/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

using testutil::CaseRandom;
using testutil::Drawn;
using testutil::List;
using Pairs = std::vector<std::pair<int, int>>;

std::string Str(Banding b) { return absl::StrCat(b.bands, " x ", b.rows); }

// Valid bandings of a drawn k (some using every row, some leaving rows unused) pass; b * r > k, b < 1 and
// r < 1 are InvalidArgument errors naming b, r and k.
TEST(ValidateBandingHidden, RejectsImpossibleBandings) {
  CaseRandom rng;
  const int k = static_cast<int>(rng.Int(2, 512));
  std::vector<int> divisors;
  for (int d = 1; d <= k; ++d) {
    if (k % d == 0) divisors.push_back(d);
  }
  const int exact_b = rng.Pick(divisors), some_b = static_cast<int>(rng.Int(1, k)), over_b = some_b;
  const Banding exact{exact_b, k / exact_b}, fewer{some_b, static_cast<int>(rng.Int(1, k / some_b))};
  const std::vector<Banding> bad = {
      {over_b, k / over_b + static_cast<int>(rng.Int(1, 5))},  // b * r > k
      {k + static_cast<int>(rng.Int(1, 50)), 1},               // more bands than rows
      {static_cast<int>(rng.Int(-5, 0)), static_cast<int>(rng.Int(1, 4))},
      {static_cast<int>(rng.Int(1, 4)), static_cast<int>(rng.Int(-5, 0))},
  };
  SCOPED_TRACE(Drawn(absl::StrCat("k = ", k, ", valid ", Str(exact), " and ", Str(fewer))));
  EXPECT_OK(ValidateBanding(exact, k)) << Str(exact) << " uses all " << k << " rows";
  EXPECT_OK(ValidateBanding(fewer, k)) << Str(fewer) << " leaves rows unused: allowed";
  for (const Banding& b : bad) {
    const absl::Status s = ValidateBanding(b, k);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << Str(b) << " with k = " << k;
    const std::vector<int64_t> named = testutil::Numbers(std::string(s.message()));
    for (int64_t v : {static_cast<int64_t>(b.bands), static_cast<int64_t>(b.rows), static_cast<int64_t>(k)}) {
      EXPECT_PROPERTY(std::count(named.begin(), named.end(), v) > 0)
          << "the error for " << Str(b) << " with k = " << k << " does not name " << v << ": \""
          << s.message() << "\" (lsh.h: naming b, r and k)";
    }
  }
}

double Formula(double s, Banding b) { return 1 - std::pow(1 - std::pow(s, b.rows), b.bands); }

// 1 - (1 - s^r)^b at drawn bandings and similarities, its ends, and its monotonicity.
TEST(SCurveHidden, FormulaEndsAndMonotone) {
  CaseRandom rng;
  std::vector<Banding> bandings(3);
  for (auto& b : bandings) b = {static_cast<int>(rng.Int(1, 40)), static_cast<int>(rng.Int(1, 25))};
  SCOPED_TRACE(Drawn("bandings " + Str(bandings[0]) + ", " + Str(bandings[1]) + ", " + Str(bandings[2])));
  for (const Banding& b : bandings) {
    for (int i = 0; i < 5; ++i) {
      const double s = rng.Real(0.01, 0.99);
      EXPECT_NEAR(SCurve(s, b), Formula(s, b), 1e-12) << "SCurve(" << s << ", " << Str(b) << ")";
    }
    EXPECT_DOUBLE_EQ(SCurve(0.0, b), 0.0) << Str(b) << ": s = 0 is never a candidate";
    EXPECT_DOUBLE_EQ(SCurve(1.0, b), 1.0) << Str(b) << ": s = 1 always is";
    double prev = 0;
    for (int i = 1; i <= 40; ++i) {
      const double s = i / 40.0;
      EXPECT_GE(SCurve(s, b), prev) << Str(b) << ": SCurve must not decrease from s = " << s - 0.025 << " to "
                                    << s;
      prev = SCurve(s, b);
    }
  }
}

// (1/b)^(1/r): at that s one band agrees with probability 1/b. Drawn bandings, and 1 x r (threshold 1).
TEST(BandingThresholdHidden, Formula) {
  CaseRandom rng;
  const Banding a{static_cast<int>(rng.Int(2, 64)), static_cast<int>(rng.Int(1, 32))},
      b{static_cast<int>(rng.Int(2, 64)), static_cast<int>(rng.Int(1, 32))},
      one{1, static_cast<int>(rng.Int(1, 30))};
  SCOPED_TRACE(Drawn("bandings " + Str(a) + ", " + Str(b) + ", " + Str(one)));
  for (const Banding& x : {a, b, one}) {
    EXPECT_NEAR(BandingThreshold(x), std::pow(1.0 / x.bands, 1.0 / x.rows), 1e-12)
        << Str(x) << ": the s at which one given band agrees with probability 1/b";
  }
}

// The cases of notes/03-dedup.md §3.3, with equal weights and k = 128 (fixed: the note states them).
TEST(PickBandingHidden, KnownOptimaForK128) {
  ASSERT_OK_AND_ASSIGN(Banding high, PickBanding(0.9, 128, 0.5, 0.5));
  EXPECT_EQ(high.bands, 5);
  EXPECT_EQ(high.rows, 25);
  ASSERT_OK_AND_ASSIGN(Banding mid, PickBanding(0.5, 128, 0.5, 0.5));
  EXPECT_EQ(mid.bands, 25);
  EXPECT_EQ(mid.rows, 5);
}

// FP and FN areas (lsh.h) of every b x r <= k at threshold t, computed here from the formula by composite
// Simpson with 1000 intervals, the coarsest the header allows. Its error is below 1.2e-8 per area for every
// banding of k <= 128 and t in [0.45, 1] (measured against 8000 intervals), so a picker that integrates with
// 1000 intervals or more picks a banding whose cost here is within 4 x 1.2e-8 of the least: kTolerance.
struct Scan {
  std::vector<Banding> bandings;
  std::vector<double> fp, fn;
  double Cost(size_t i, double wfp, double wfn) const { return wfp * fp[i] + wfn * fn[i]; }
  size_t Index(Banding b) const {
    for (size_t i = 0; i < bandings.size(); ++i) {
      if (bandings[i].bands == b.bands && bandings[i].rows == b.rows) return i;
    }
    return bandings.size();
  }
  size_t Best(double wfp, double wfn) const {
    size_t best = 0;
    for (size_t i = 1; i < bandings.size(); ++i) {
      if (Cost(i, wfp, wfn) < Cost(best, wfp, wfn)) best = i;
    }
    return best;
  }
};
constexpr double kTolerance = 1e-7;

Scan ScanAll(double t, int k) {
  auto simpson = [](auto f, double lo, double hi) {
    const int n = 1000;
    const double h = (hi - lo) / n;
    double sum = f(lo) + f(hi);
    for (int i = 1; i < n; ++i) sum += (i % 2 ? 4.0 : 2.0) * f(lo + i * h);
    return sum * h / 3;
  };
  Scan scan;
  for (int b = 1; b <= k; ++b) {
    for (int r = 1; r <= k / b; ++r) {
      const Banding x{b, r};
      scan.bandings.push_back(x);
      scan.fp.push_back(simpson([&](double s) { return Formula(s, x); }, 0.0, t));
      scan.fn.push_back(simpson([&](double s) { return 1 - Formula(s, x); }, t, 1.0));
    }
  }
  return scan;
}

// The picker against a brute-force scan of the same cost, for three drawn (t, k, weights): t in [0.5, 0.95],
// k in [16, 128], w_FP in [0.05, 0.95] and w_FN = 1 - w_FP.
TEST(PickBandingHidden, MinimisesWeightedAreas) {
  CaseRandom rng;
  for (int trial = 0; trial < 3; ++trial) {
    const double t = rng.Real(0.5, 0.95), wfp = rng.Real(0.05, 0.95), wfn = 1 - wfp;
    const int k = static_cast<int>(rng.Int(16, 128));
    SCOPED_TRACE(Drawn(absl::StrCat("PickBanding(", t, ", ", k, ", ", wfp, ", ", wfn, ")")));
    ASSERT_OK_AND_ASSIGN(Banding got, PickBanding(t, k, wfp, wfn));
    ASSERT_OK(ValidateBanding(got, k)) << "picked " << Str(got);
    const Scan scan = ScanAll(t, k);
    const size_t g = scan.Index(got), best = scan.Best(wfp, wfn);
    EXPECT_PROPERTY(scan.Cost(g, wfp, wfn) <= scan.Cost(best, wfp, wfn) + kTolerance)
        << "picked " << Str(got) << " of cost w_FP FP + w_FN FN = " << scan.Cost(g, wfp, wfn) << " (FP "
        << scan.fp[g] << ", FN " << scan.fn[g] << "), but the scan over every b x r <= k finds cost "
        << scan.Cost(best, wfp, wfn);
  }
}

// The note's two bandings at t = 0.8, k = 128: equal weights 9 x 13, the tool's (0.05, 0.95) 16 x 8 (fixed:
// notes/03-dedup.md §3.3 states them).
TEST(PickBandingHidden, ToolDefaultIs16x8AndEqualWeights9x13) {
  ASSERT_OK_AND_ASSIGN(Banding equal, PickBanding(0.8, 128, 0.5, 0.5));
  EXPECT_EQ(equal.bands, 9);
  EXPECT_EQ(equal.rows, 13);
  ASSERT_OK_AND_ASSIGN(Banding tool, PickBanding(0.8, 128, 0.05, 0.95));
  EXPECT_EQ(tool.bands, 16);
  EXPECT_EQ(tool.rows, 8);
}

// Weighing missed pairs more moves the step left: more candidates, fewer misses. Drawn t in [0.6, 0.9] and
// k in [64, 128], equal weights against a drawn w_FN / w_FP of 4 to 19, redrawn until the two least costs
// of the scan are different bandings (so the direction is visible; at most 8 draws). For exact minimisers the
// false-negative weight can only lower the FN area and raise the FP area; with the scan's tolerance, within
// 2e-7.
TEST(PickBandingHidden, FalseNegativeWeightLowersThreshold) {
  CaseRandom rng;
  double t = 0, wfp = 0;
  int k = 0;
  Scan scan;
  size_t best_equal = 0, best_heavy = 0;
  for (int attempt = 0; attempt < 8 && best_equal == best_heavy; ++attempt) {
    t = rng.Real(0.6, 0.9), k = static_cast<int>(rng.Int(64, 128));
    wfp = 1 / (1 + rng.Real(4, 19));
    scan = ScanAll(t, k);
    best_equal = scan.Best(0.5, 0.5), best_heavy = scan.Best(wfp, 1 - wfp);
  }
  SCOPED_TRACE(
      Drawn(absl::StrCat("t = ", t, ", k = ", k, ": weights (0.5, 0.5) and (", wfp, ", ", 1 - wfp, ")")));
  ASSERT_OK_AND_ASSIGN(Banding equal, PickBanding(t, k, 0.5, 0.5));
  ASSERT_OK_AND_ASSIGN(Banding heavy, PickBanding(t, k, wfp, 1 - wfp));
  const size_t e = scan.Index(equal), h = scan.Index(heavy);
  ASSERT_LT(e, scan.bandings.size()) << "picked " << Str(equal) << ": b * r > k";
  ASSERT_LT(h, scan.bandings.size()) << "picked " << Str(heavy) << ": b * r > k";
  EXPECT_PROPERTY(scan.fn[h] <= scan.fn[e] + 2e-7 && scan.fp[h] >= scan.fp[e] - 2e-7)
      << "equal weights pick " << Str(equal) << " (FP " << scan.fp[e] << ", FN " << scan.fn[e]
      << "), the heavier false-negative weight picks " << Str(heavy) << " (FP " << scan.fp[h] << ", FN "
      << scan.fn[h] << "): weighing misses more must not leave more misses";
}

// Invalid parameters, drawn from each class: t <= 0, t > 1, k < 1, a negative weight, both weights zero;
// t = 1 is allowed.
TEST(PickBandingHidden, InvalidParameters) {
  CaseRandom rng;
  const double low = -rng.Real(0, 2), high = 1 + rng.Real(1e-6, 2);
  const int k = static_cast<int>(rng.Int(-10, 0)), good_k = static_cast<int>(rng.Int(1, 64));
  const double negative = -rng.Real(0.01, 2);
  SCOPED_TRACE(Drawn(absl::StrCat("t = ", low, " and ", high, ", k = ", k, ", weight ", negative,
                                  "; PickBanding(1.0, ", good_k, ")")));
  for (double t : {0.0, low, high}) {
    EXPECT_EQ(PickBanding(t, 128).status().code(), absl::StatusCode::kInvalidArgument) << "t = " << t;
  }
  EXPECT_EQ(PickBanding(0.5, k).status().code(), absl::StatusCode::kInvalidArgument) << "k = " << k;
  EXPECT_EQ(PickBanding(0.5, 128, negative, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PickBanding(0.5, 128, 1, negative).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PickBanding(0.5, 128, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(Banding one, PickBanding(1.0, good_k));  // threshold 1 is allowed
  EXPECT_OK(ValidateBanding(one, good_k));
}

// --- CandidatePairs against a brute force
// -------------------------------------------------------------------

// Random signatures (distinct 64-bit values: no two agree anywhere by chance).
std::vector<Signature> RandomSignatures(CaseRandom& rng, int n, int k) {
  std::vector<Signature> sigs(n, Signature(k));
  for (auto& s : sigs)
    for (auto& x : s) x = rng.Next();
  return sigs;
}

// Copies rows [from, from + count) of `src` to rows [to, to + count) of `dst`.
void CopyRows(const Signature& src, Signature& dst, int from, int to, int count) {
  for (int i = 0; i < count; ++i) dst[to + i] = src[from + i];
}

std::vector<int> AgreeingRows(const Signature& x, const Signature& y) {
  std::vector<int> rows;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] == y[i]) rows.push_back(static_cast<int>(i));
  }
  return rows;
}

// "" when `got` is the brute force's list of candidate pairs, else its first difference, explained by the
// rows where the pair agrees.
std::string CandidatesDiffer(const Pairs& got, const std::vector<Signature>& sigs, Banding b) {
  for (size_t x = 1; x < got.size(); ++x) {
    if (!(got[x - 1] < got[x])) {
      return absl::StrCat("pairs ", x - 1, " and ", x, " are (", got[x - 1].first, ", ", got[x - 1].second,
                          ") and (", got[x].first, ", ", got[x].second,
                          "): the list is sorted by (i, j), each pair once");
    }
  }
  for (const auto& [i, j] : got) {
    if (i < 0 || j >= static_cast<int>(sigs.size()) || i >= j) {
      return absl::StrCat("pair (", i, ", ", j, ") is not a pair i < j of documents");
    }
  }
  const Pairs want = testutil::ReferenceCandidates(sigs, b.bands, b.rows);
  for (const auto& p : want) {
    if (!std::binary_search(got.begin(), got.end(), p)) {
      return absl::StrCat("(", p.first, ", ", p.second, ") is missing: the two agree on rows ",
                          List(AgreeingRows(sigs[p.first], sigs[p.second])),
                          ", with band j = rows [j r, (j + 1) r)");
    }
  }
  for (const auto& p : got) {
    if (!std::binary_search(want.begin(), want.end(), p)) {
      return absl::StrCat("(", p.first, ", ", p.second, ") is no candidate: the two agree only on rows ",
                          List(AgreeingRows(sigs[p.first], sigs[p.second])),
                          ", which hold no whole band j = rows [j r, (j + 1) r)");
    }
  }
  return "";
}

// Drawn b in 2..6, r in 2..5, k = b r + 0..3, 8-14 documents; planted on four disjoint pairs: agreement on
// the last band only, on one drawn band, on r rows straddling two bands, and on r - 1 rows of a band.
TEST(CandidatePairsHidden, BandsAreConsecutiveRowBlocks) {
  CaseRandom rng;
  const Banding b{static_cast<int>(rng.Int(2, 6)), static_cast<int>(rng.Int(2, 5))};
  const int k = b.bands * b.rows + static_cast<int>(rng.Int(0, 3)), n = static_cast<int>(rng.Int(8, 14));
  std::vector<Signature> sigs = RandomSignatures(rng, n, k);
  std::vector<int> docs(n);
  std::iota(docs.begin(), docs.end(), 0);
  rng.Shuffle(docs);
  const int r = b.rows, last = (b.bands - 1) * r, band = static_cast<int>(rng.Int(0, b.bands - 1)) * r;
  const int straddle = static_cast<int>(rng.Int(0, b.bands - 2)) * r + static_cast<int>(rng.Int(1, r - 1));
  CopyRows(sigs[docs[0]], sigs[docs[1]], last, last, r);
  CopyRows(sigs[docs[2]], sigs[docs[3]], band, band, r);
  CopyRows(sigs[docs[4]], sigs[docs[5]], straddle, straddle, r);
  const int partial = static_cast<int>(rng.Int(0, b.bands - 1)) * r + static_cast<int>(rng.Int(0, 1));
  CopyRows(sigs[docs[6]], sigs[docs[7]], partial, partial, r - 1);
  SCOPED_TRACE(Drawn(absl::StrCat(n, " signatures of k = ", k, ", banding ", Str(b))));
  ASSERT_OK_AND_ASSIGN(Pairs got, CandidatePairs(sigs, b));
  const std::string diff = CandidatesDiffer(got, sigs, b);
  EXPECT_PROPERTY(diff.empty()) << diff;
}

// Equal values in different bands are not a match: drawn b in 2..8, r in 1..4, and 1-3 document pairs where
// one holds the other's band j as its band j' != j (plus one pair sharing band 0).
TEST(CandidatePairsHidden, BandKeysDoNotMatchAcrossBands) {
  CaseRandom rng;
  const Banding b{static_cast<int>(rng.Int(2, 8)), static_cast<int>(rng.Int(1, 4))};
  const int k = b.bands * b.rows + static_cast<int>(rng.Int(0, 2)), moved = static_cast<int>(rng.Int(1, 3));
  const int n = 2 * moved + 2 + static_cast<int>(rng.Int(0, 4));
  std::vector<Signature> sigs = RandomSignatures(rng, n, k);
  std::vector<int> docs(n);
  std::iota(docs.begin(), docs.end(), 0);
  rng.Shuffle(docs);
  for (int m = 0; m < moved; ++m) {
    const int from = static_cast<int>(rng.Int(0, b.bands - 1));
    int to = static_cast<int>(rng.Int(0, b.bands - 2));
    to += to >= from;
    CopyRows(sigs[docs[2 * m]], sigs[docs[2 * m + 1]], from * b.rows, to * b.rows, b.rows);
  }
  CopyRows(sigs[docs[2 * moved]], sigs[docs[2 * moved + 1]], 0, 0, b.rows);  // band 0 shared
  SCOPED_TRACE(Drawn(absl::StrCat(n, " signatures of k = ", k, ", banding ", Str(b))));
  ASSERT_OK_AND_ASSIGN(Pairs got, CandidatePairs(sigs, b));
  const std::string diff = CandidatesDiffer(got, sigs, b);
  EXPECT_PROPERTY(diff.empty()) << diff;
}

// Drawn b x r (b, r in 2..5) with 1-6 rows past b r: a pair agreeing only there (and on r - 1 rows of the
// last band) is no candidate; a pair agreeing on the last band is.
TEST(CandidatePairsHidden, RowsPastBTimesRAreIgnored) {
  CaseRandom rng;
  const Banding b{static_cast<int>(rng.Int(2, 5)), static_cast<int>(rng.Int(2, 5))};
  const int used = b.bands * b.rows, k = used + static_cast<int>(rng.Int(1, 6)),
            n = static_cast<int>(rng.Int(4, 8));
  std::vector<Signature> sigs = RandomSignatures(rng, n, k);
  std::vector<int> docs(n);
  std::iota(docs.begin(), docs.end(), 0);
  rng.Shuffle(docs);
  CopyRows(sigs[docs[0]], sigs[docs[1]], used, used, k - used);
  CopyRows(sigs[docs[0]], sigs[docs[1]], used - b.rows + 1, used - b.rows + 1, b.rows - 1);
  CopyRows(sigs[docs[2]], sigs[docs[3]], used - b.rows, used - b.rows, b.rows);
  SCOPED_TRACE(Drawn(absl::StrCat(n, " signatures of k = ", k, ", banding ", Str(b))));
  ASSERT_OK_AND_ASSIGN(Pairs got, CandidatePairs(sigs, b));
  const std::string diff = CandidatesDiffer(got, sigs, b);
  EXPECT_PROPERTY(diff.empty()) << diff;
}

// Groups of 2-5 documents that share 1-3 whole bands (so each pair of a group is found in several bands;
// group 0 shares only the last band), and a few links between groups through one band; drawn b in 3..6,
// r in 2..3; documents in drawn order. Every pair once, sorted.
TEST(CandidatePairsHidden, SortedAndEachPairOnce) {
  CaseRandom rng;
  const Banding b{static_cast<int>(rng.Int(3, 6)), static_cast<int>(rng.Int(2, 3))};
  const int k = b.bands * b.rows, groups = static_cast<int>(rng.Int(2, 4));
  std::vector<int> size(groups);
  int n = 0;
  for (int& s : size) n += s = static_cast<int>(rng.Int(2, 5));
  n += static_cast<int>(rng.Int(0, 3));  // documents in no group
  std::vector<Signature> sigs = RandomSignatures(rng, n, k);
  std::vector<int> docs(n);
  std::iota(docs.begin(), docs.end(), 0);
  rng.Shuffle(docs);
  int next = 0;
  for (int g = 0; g < groups; ++g) {
    std::vector<int> bands(b.bands);
    std::iota(bands.begin(), bands.end(), 0);
    rng.Shuffle(bands);
    bands.resize(rng.Int(1, 3));
    if (g == 0) bands = {b.bands - 1};  // group 0 shares the last band only
    for (int m = 1; m < size[g]; ++m) {
      for (int j : bands) CopyRows(sigs[docs[next]], sigs[docs[next + m]], j * b.rows, j * b.rows, b.rows);
    }
    next += size[g];
  }
  for (int link = static_cast<int>(rng.Int(1, 3)); link > 0; --link) {  // into documents outside group 0
    const int x = docs[rng.Int(0, n - 1)], y = docs[rng.Int(size[0], n - 1)];
    const int j = static_cast<int>(rng.Int(0, b.bands - 1));
    if (x != y) CopyRows(sigs[x], sigs[y], j * b.rows, j * b.rows, b.rows);
  }
  SCOPED_TRACE(Drawn(absl::StrCat(n, " signatures of k = ", k, " in ", groups, " groups, banding ", Str(b))));
  ASSERT_OK_AND_ASSIGN(Pairs got, CandidatePairs(sigs, b));
  const std::string diff = CandidatesDiffer(got, sigs, b);
  EXPECT_PROPERTY(diff.empty()) << diff;
}

// No signatures: no pairs (drawn banding); signatures of two drawn lengths, or a drawn banding with b r > k:
// InvalidArgument.
TEST(CandidatePairsHidden, ErrorsAndEmptyInput) {
  CaseRandom rng;
  const Banding any{static_cast<int>(rng.Int(1, 8)), static_cast<int>(rng.Int(1, 8))};
  const int k = static_cast<int>(rng.Int(2, 12));
  const int other = rng.Chance(0.5) ? k + static_cast<int>(rng.Int(1, 3))
                                    : k - static_cast<int>(rng.Int(1, std::min(3, k - 1)));
  const Banding too_big{static_cast<int>(rng.Int(1, k)), 0};
  const Banding over{too_big.bands, k / too_big.bands + 1};
  std::vector<Signature> uneven = RandomSignatures(rng, static_cast<int>(rng.Int(2, 5)), k);
  uneven[rng.Int(1, uneven.size() - 1)].resize(other);
  const std::vector<Signature> fine = RandomSignatures(rng, 2, k);
  SCOPED_TRACE(Drawn(absl::StrCat("no signatures with ", Str(any), "; lengths ", k, " and ", other,
                                  "; k = ", k, " with ", Str(over))));
  ASSERT_OK_AND_ASSIGN(Pairs none, CandidatePairs({}, any));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(CandidatePairs(uneven, {1, 1}).status().code(), absl::StatusCode::kInvalidArgument)
      << "signatures of lengths " << k << " and " << other;
  EXPECT_EQ(CandidatePairs(fine, over).status().code(), absl::StatusCode::kInvalidArgument)
      << Str(over) << " with k = " << k;
}

// The S-curve measured: for 400 pairs of random sets at exact similarity s, the fraction that becomes a
// candidate under 16 x 8 with k = 128 (a drawn family) follows 1 - (1 - s^8)^16 within 5.5 (sd + 1), sd the
// binomial standard deviation; six drawn levels of s, one in each of [0.10, 0.25], [0.25, 0.40],
// [0.40, 0.55], [0.55, 0.70], [0.72, 0.80], [0.80, 0.90]. From the exact binomial distribution of the hits, a
// correct solution fails with probability below 3e-8; a banding of overlapping rows stays within the bound
// at the level in [0.72, 0.80] with probability below 1e-13.
TEST(SCurveHidden, MeasuredCandidateRateFollowsFormula) {
  CaseRandom rng;
  const uint64_t seed = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("k = 128, seed ", seed, ", banding 16 x 8")));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(128, seed));
  const Banding banding{16, 8};
  constexpr int kPairs = 400;
  for (auto [lo, hi] : std::vector<std::pair<double, double>>{
           {0.10, 0.25}, {0.25, 0.40}, {0.40, 0.55}, {0.55, 0.70}, {0.72, 0.80}, {0.80, 0.90}}) {
    const int u = static_cast<int>(rng.Int(150, 250));
    const int common = static_cast<int>(std::lround(rng.Real(lo, hi) * u));
    const double s = static_cast<double>(common) / u;
    std::vector<Signature> sigs;
    for (int p = 0; p < kPairs; ++p) {
      std::vector<uint64_t> a, b;
      for (int i = 0; i < common; ++i) a.push_back(rng.Next()), b.push_back(a.back());
      const int only_a = static_cast<int>(rng.Int(0, u - common));
      for (int i = 0; i < only_a; ++i) a.push_back(rng.Next());
      for (int i = common + only_a; i < u; ++i) b.push_back(rng.Next());
      std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
      sigs.push_back(h.Sign(a)), sigs.push_back(h.Sign(b));
    }
    ASSERT_OK_AND_ASSIGN(Pairs cands, CandidatePairs(sigs, banding));
    int hits = 0;
    for (auto [i, j] : cands) hits += i % 2 == 0 && j == i + 1;
    const double pred = Formula(s, banding), sd = std::sqrt(kPairs * pred * (1 - pred)) + 1;
    EXPECT_PROPERTY(std::abs(hits - kPairs * pred) <= 5.5 * sd)
        << hits << " of " << kPairs << " pairs of similarity s = " << common << "/" << u
        << " became candidates; "
        << "the S-curve predicts " << kPairs * pred << " (allowed: +- " << 5.5 * sd << ")";
  }
}

}  // namespace
}  // namespace distlab::dedup
