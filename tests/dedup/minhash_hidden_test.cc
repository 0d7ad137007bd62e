// Hidden tests, Lab 3 stage B: the seeded family, per-function minima, the estimator and its standard error,
// deterministic parallel signing.
//
// Every case draws its k, hash seeds, sets, overlaps and thread counts from a CaseRandom (test_util.h). The
// statistical cases hold for any draw with the probabilities stated at each (the rows of a signature behave
// as independent Bernoulli(J) trials; notes/03-dedup.md §2.3), and their bounds are chosen so that a correct
// solution fails one of them with probability below 1e-6 per grading.
#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"
#include "labs/dedup/minhash.h"
#include "tests/dedup/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

using testutil::CaseRandom;
using testutil::Drawn;
using testutil::List;

// Two random sets with |A ∩ B| = common, |A \ B| = only_a, |B \ A| = only_b: J = common / (sum of all three).
void MakePair(CaseRandom& rng, int common, int only_a, int only_b, std::vector<uint64_t>& a,
              std::vector<uint64_t>& b) {
  a.clear(), b.clear();
  for (int i = 0; i < common; ++i) {
    const uint64_t x = rng.Next();
    a.push_back(x), b.push_back(x);
  }
  for (int i = 0; i < only_a; ++i) a.push_back(rng.Next());
  for (int i = 0; i < only_b; ++i) b.push_back(rng.Next());
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
}

// The sizes of a pair of similarity about `j` with union size `u`: common, only_a, only_b.
struct Overlap {
  int common, only_a, only_b;
  double J() const { return static_cast<double>(common) / (common + only_a + only_b); }
  std::string Describe() const {
    return absl::StrCat("|A ∩ B| = ", common, ", |A \\ B| = ", only_a, ", |B \\ A| = ", only_b, " (J = ", J(),
                        ")");
  }
};
Overlap DrawOverlap(CaseRandom& rng, double j, int u) {
  const int common = static_cast<int>(std::lround(j * u));
  const int only_a = static_cast<int>(rng.Int(0, u - common));
  return {common, only_a, u - common - only_a};
}

std::string Hex(uint64_t x) { return absl::StrCat("0x", absl::Hex(x)); }

TEST(MinHasherHidden, NonPositiveKIsAnError) {
  CaseRandom rng;
  const int negative = static_cast<int>(rng.Int(-1000, -1));
  const uint64_t seed = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("k = 0 and k = ", negative, ", seed ", seed)));
  for (int k : {0, negative}) {
    EXPECT_EQ(MinHasher::Create(k, seed).status().code(), absl::StatusCode::kInvalidArgument) << "k = " << k;
  }
}

// One stream for the family: a_0 b_0 a_1 b_1 ... a_{k-1} b_{k-1}; every a odd; other seeds, other functions.
TEST(MinHasherHidden, FamilyDrawnFromOneSeededStream) {
  CaseRandom rng;
  const uint64_t seed = rng.Next(), other_seed = seed + rng.Int(1, 1000);
  const int k = static_cast<int>(rng.Int(2, 256));
  SCOPED_TRACE(Drawn(absl::StrCat("MinHasher::Create(", k, ", ", seed, "), and seed ", other_seed)));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, seed));
  ASSERT_EQ(h.k(), k);
  uint64_t state = seed;
  for (int i = 0; i < k; ++i) {
    const uint64_t a = SplitMix64Next(state) | 1, b = SplitMix64Next(state);
    if (h.a(i) != a || h.b(i) != b) {
      ADD_FAILURE() << (h.a(i) != a ? "a_" : "b_") << i << " = " << Hex(h.a(i) != a ? h.a(i) : h.b(i))
                    << " is not the value minhash.h reads off the SplitMix64 stream that starts at the seed ("
                    << (h.a(i) != a ? "value 2i + 1, lowest bit set" : "value 2i + 2") << ")";
      break;
    }
  }
  ASSERT_OK_AND_ASSIGN(MinHasher other, MinHasher::Create(k, other_seed));
  EXPECT_NE(h.a(0), other.a(0)) << "another seed must give another family";
  const int i = static_cast<int>(rng.Int(0, k - 2));
  EXPECT_NE(h.a(i), h.a(i + 1)) << "functions " << i << " and " << i + 1 << " are the same";
}

// Against a brute-force minimum over a drawn set (100 to 1500 shingles, random 64-bit values and small
// numbers) given in random order, for a drawn family.
TEST(SignHidden, PerFunctionMinimumOverTheWholeSet) {
  CaseRandom rng;
  std::vector<uint64_t> set(rng.Int(100, 1500));
  for (auto& x : set) x = rng.Chance(0.2) ? rng.Int(0, 1000) : rng.Next();
  const int k = static_cast<int>(rng.Int(16, 128));
  const uint64_t seed = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("k = ", k, ", seed ", seed, ", a set of ", set.size(), " shingles")));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, seed));
  const Signature sig = h.Sign(set);
  ASSERT_EQ(sig.size(), static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    size_t arg = 0;
    for (size_t x = 1; x < set.size(); ++x) {
      if (h.a(i) * set[x] + h.b(i) < h.a(i) * set[arg] + h.b(i)) arg = x;
    }
    if (sig[i] != h.a(i) * set[arg] + h.b(i)) {
      ADD_FAILURE() << "position " << i << " is " << Hex(sig[i]) << ", but shingle " << arg << " of "
                    << set.size() << " (" << Hex(set[arg]) << ") gives a_" << i << " x + b_" << i << " = "
                    << Hex(h.a(i) * set[arg] + h.b(i))
                    << (sig[i] < h.a(i) * set[arg] + h.b(i) ? ", the least" : "")
                    << ": sig[i] is the minimum of h_i over the whole set";
      break;
    }
  }
  rng.Shuffle(set);
  EXPECT_PROPERTY(h.Sign(set) == sig) << "a signature must not depend on the order of the shingles";
}

TEST(SignHidden, EmptyAndSingletonSets) {
  CaseRandom rng;
  const int k = static_cast<int>(rng.Int(1, 64));
  const uint64_t seed = rng.Next(), x = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("k = ", k, ", seed ", seed, ", the set {", Hex(x), "}")));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, seed));
  EXPECT_PROPERTY(h.Sign({}) == Signature(k, kEmptyMin))
      << "the empty set's signature is kEmptyMin everywhere";
  const Signature one = h.Sign({x});
  ASSERT_EQ(one.size(), static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    EXPECT_PROPERTY(one[i] == h.a(i) * x + h.b(i)) << "position " << i << " of a one-shingle set is h_i(x)";
  }
}

// Two drawn signatures of 1-16 values that agree at m drawn positions: the estimate is m / length.
TEST(EstimateJaccardHidden, FractionOfEqualPositions) {
  CaseRandom rng;
  const int length = static_cast<int>(rng.Int(1, 16)), m = static_cast<int>(rng.Int(0, length));
  Signature x(length), y(length);
  std::vector<int> positions(length);
  std::iota(positions.begin(), positions.end(), 0);
  rng.Shuffle(positions);
  for (int i = 0; i < length; ++i) x[i] = rng.Int(0, 99);
  for (int p = 0; p < length; ++p)
    y[positions[p]] = p < m ? x[positions[p]] : x[positions[p]] + rng.Int(1, 9);
  Signature shorter(x.begin(), x.end() - 1);
  if (shorter.empty()) shorter = {1, 2};
  SCOPED_TRACE(Drawn("x = " + List(x) + ", y = " + List(y)));
  ASSERT_OK_AND_ASSIGN(double est, EstimateJaccard(x, y));
  EXPECT_PROPERTY(std::abs(est - static_cast<double>(m) / length) < 1e-12)
      << "EstimateJaccard(x, y) = " << est << ": the fraction of positions where x and y agree";
  EXPECT_EQ(EstimateJaccard(x, shorter).status().code(), absl::StatusCode::kInvalidArgument)
      << "lengths " << x.size() << " and " << shorter.size();
  EXPECT_EQ(EstimateJaccard({}, {}).status().code(), absl::StatusCode::kInvalidArgument)
      << "empty signatures";
}

// The statistical test (notes/03-dedup.md §2.3): 400 pairs, k = 128, a drawn family, each pair with a drawn
// J in [0.2, 0.8] and union of 150-300 shingles. z = (estimate - J) / sqrt(J (1 - J) / k) has mean 0 and
// variance 1, so
//   - at least 85 % of |z| are below 2 (about 95 % expected), none above 7;
//   - the mean of z^2 is between 0.6 and 1.5 (about 1): errors neither too large nor suspiciously small.
// Computed from the exact binomial distribution of the estimate, a correct solution fails a grading with
// probability below 1e-7 (the three checks: < 1e-12, < 6e-8, < 1e-8; J drawn on a union of 150-300, so
// within 0.004 of [0.2, 0.8]). A family whose functions agree all
// together (estimates 0 or 1) has |z| >= 5.6 for every pair.
TEST(EstimateJaccardHidden, ErrorMatchesStandardError) {
  CaseRandom rng;
  constexpr int kPairs = 400, k = 128;
  const uint64_t seed = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("400 pairs of drawn similarity in [0.2, 0.8], k = 128, seed ", seed)));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, seed));
  int within2 = 0;
  double sum_z2 = 0, worst_z = 0;
  std::string worst;
  std::vector<uint64_t> a, b;
  for (int p = 0; p < kPairs; ++p) {
    const Overlap o = DrawOverlap(rng, rng.Real(0.2, 0.8), static_cast<int>(rng.Int(150, 300)));
    MakePair(rng, o.common, o.only_a, o.only_b, a, b);
    const double j = o.J();
    ASSERT_OK_AND_ASSIGN(double est, EstimateJaccard(h.Sign(a), h.Sign(b)));
    const double z = (est - j) / std::sqrt(j * (1 - j) / k);
    within2 += std::abs(z) < 2;
    sum_z2 += z * z;
    if (std::abs(z) > worst_z) worst_z = std::abs(z), worst = absl::StrCat(o.Describe(), ": estimate ", est);
  }
  EXPECT_GE(within2, 0.85 * kPairs) << "only " << within2 << " of " << kPairs
                                    << " estimates within 2 standard errors; the worst pair: " << worst;
  EXPECT_LE(worst_z, 7.0) << "an estimate " << worst_z << " standard errors off: " << worst;
  EXPECT_GT(sum_z2 / kPairs, 0.6) << "mean z^2 " << sum_z2 / kPairs << ": errors smaller than k rows allow";
  EXPECT_LT(sum_z2 / kPairs, 1.5) << "mean z^2 " << sum_z2 / kPairs
                                  << ": errors larger than the standard error "
                                  << "sqrt(J (1 - J) / k); the worst pair: " << worst;
}

// Pr[min agrees] = J for EACH function: over 300 pairs of one drawn similarity J in [0.2, 0.8], every
// position of k (drawn in 24..48) agrees about 300 J times, within 6 binomial standard deviations (each
// position's count is exactly Binomial(300, J); a correct solution fails with probability below 6e-7).
TEST(EstimateJaccardHidden, EveryPositionAgreesWithProbabilityJ) {
  CaseRandom rng;
  constexpr int kPairs = 300;
  const int k = static_cast<int>(rng.Int(24, 48));
  const uint64_t seed = rng.Next();
  const Overlap o = DrawOverlap(rng, rng.Real(0.2, 0.8), static_cast<int>(rng.Int(100, 200)));
  SCOPED_TRACE(Drawn(absl::StrCat("300 pairs with ", o.Describe(), ", k = ", k, ", seed ", seed)));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, seed));
  std::vector<int> agree(k, 0);
  std::vector<uint64_t> a, b;
  for (int p = 0; p < kPairs; ++p) {
    MakePair(rng, o.common, o.only_a, o.only_b, a, b);
    const Signature x = h.Sign(a), y = h.Sign(b);
    for (int i = 0; i < k; ++i) agree[i] += x[i] == y[i];
  }
  const double mean = kPairs * o.J(), sd = std::sqrt(kPairs * o.J() * (1 - o.J()));
  for (int i = 0; i < k; ++i) {
    EXPECT_PROPERTY(std::abs(agree[i] - mean) <= 6 * sd)
        << "position " << i << " agreed in " << agree[i] << " of " << kPairs << " pairs: each position must "
        << "agree with probability J (300 J = " << mean << ", standard deviation " << sd << ")";
  }
}

// Different positions are different functions: their agreements are not all-or-nothing. 50 pairs of drawn
// J in [0.25, 0.75], k = 128: each estimate strictly between 0.05 and 0.95 (a correct solution fails with
// probability below 1e-7).
TEST(EstimateJaccardHidden, PositionsAreNotCopiesOfEachOther) {
  CaseRandom rng;
  const uint64_t seed = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("50 pairs of drawn similarity in [0.25, 0.75], k = 128, seed ", seed)));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(128, seed));
  std::vector<uint64_t> a, b;
  int strictly_between = 0;
  std::string example;
  for (int p = 0; p < 50; ++p) {
    const Overlap o = DrawOverlap(rng, rng.Real(0.25, 0.75), static_cast<int>(rng.Int(100, 200)));
    MakePair(rng, o.common, o.only_a, o.only_b, a, b);
    ASSERT_OK_AND_ASSIGN(double est, EstimateJaccard(h.Sign(a), h.Sign(b)));
    if (est > 0.05 && est < 0.95) {
      ++strictly_between;
    } else if (example.empty()) {
      example = absl::StrCat(o.Describe(), ": estimate ", est);
    }
  }
  EXPECT_EQ(strictly_between, 50) << "estimates of 0 or 1 mean the positions agree all together; e.g. "
                                  << example;
}

// A drawn corpus (200-500 sets of 0-300 shingles, k in 64..128) signed with 1 thread and with 0 (the
// hardware's), 2-3, 4-8 and 9-16 threads: the same signatures, each Sign of its own set.
TEST(SignAllHidden, SameResultForEveryThreadCount) {
  CaseRandom rng;
  std::vector<std::vector<uint64_t>> sets(rng.Int(200, 500));
  for (auto& s : sets) {
    s.resize(rng.Int(0, 300));
    for (auto& x : s) x = rng.Next();
  }
  const int k = static_cast<int>(rng.Int(64, 128));
  const std::vector<int> threads = {0, static_cast<int>(rng.Int(2, 3)), static_cast<int>(rng.Int(4, 8)),
                                    static_cast<int>(rng.Int(9, 16))};
  SCOPED_TRACE(Drawn(absl::StrCat(sets.size(), " sets, k = ", k, ", threads 1, ", threads[0], ", ",
                                  threads[1], ", ", threads[2], ", ", threads[3])));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, rng.Next()));
  ASSERT_OK_AND_ASSIGN(auto one, SignAll(h, sets, 1));
  ASSERT_EQ(one.size(), sets.size());
  for (size_t d = rng.Int(0, 36); d < sets.size(); d += 37) {
    EXPECT_PROPERTY(one[d] == h.Sign(sets[d]))
        << "1 thread: slot " << d << " (a set of " << sets[d].size() << ") is not Sign(sets[" << d << "])";
  }
  for (int t : threads) {
    ASSERT_OK_AND_ASSIGN(auto many, SignAll(h, sets, t));
    ASSERT_EQ(many.size(), sets.size()) << t << " threads";
    for (size_t d = 0; d < sets.size(); ++d) {
      if (many[d] != one[d]) {
        ADD_FAILURE() << t << " threads: slot " << d << " (a set of " << sets[d].size()
                      << ") differs from the 1-thread result";
        break;
      }
    }
  }
}

TEST(SignAllHidden, EdgeCases) {
  CaseRandom rng;
  const int docs = static_cast<int>(rng.Int(1, 3)), threads = static_cast<int>(rng.Int(docs + 1, 32)),
            negative = static_cast<int>(rng.Int(-100, -1));
  std::vector<std::vector<uint64_t>> sets(docs);
  for (auto& s : sets) s = {rng.Next(), rng.Next()};
  SCOPED_TRACE(Drawn(absl::StrCat(docs, " sets on ", threads, " threads; threads = ", negative)));
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(8, rng.Next()));
  ASSERT_OK_AND_ASSIGN(auto none, SignAll(h, {}, static_cast<int>(rng.Int(1, 16))));
  EXPECT_TRUE(none.empty()) << "no sets: no signatures";
  ASSERT_OK_AND_ASSIGN(auto few, SignAll(h, sets, threads));  // more threads than documents
  ASSERT_EQ(few.size(), sets.size());
  for (int d = 0; d < docs; ++d) EXPECT_PROPERTY(few[d] == h.Sign(sets[d])) << "slot " << d;
  EXPECT_EQ(SignAll(h, sets, negative).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::dedup
