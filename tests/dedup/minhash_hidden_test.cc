// Hidden tests, Lab 3 stage B: the seeded family, per-function minima, the estimator and its standard error,
// deterministic parallel signing.
#include <algorithm>
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "labs/dedup/minhash.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

// Two random sets with |A ∩ B| = common, |A \ B| = only_a, |B \ A| = only_b: J = common / (sum of all three).
void MakePair(std::mt19937_64& rng, int common, int only_a, int only_b, std::vector<uint64_t>& a,
              std::vector<uint64_t>& b) {
  a.clear(), b.clear();
  for (int i = 0; i < common; ++i) {
    const uint64_t x = rng();
    a.push_back(x), b.push_back(x);
  }
  for (int i = 0; i < only_a; ++i) a.push_back(rng());
  for (int i = 0; i < only_b; ++i) b.push_back(rng());
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
}

TEST(MinHasherHidden, NonPositiveKIsAnError) {
  EXPECT_EQ(MinHasher::Create(0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MinHasher::Create(-5, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// One stream for the family: a_0 b_0 a_1 b_1 ... a_{k-1} b_{k-1}; every a odd; no two functions equal.
TEST(MinHasherHidden, FamilyDrawnFromOneSeededStream) {
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(128, 2024));
  ASSERT_EQ(h.k(), 128);
  uint64_t state = 2024;
  for (int i = 0; i < 128; ++i) {
    ASSERT_EQ(h.a(i), SplitMix64Next(state) | 1) << "a_" << i;
    ASSERT_EQ(h.b(i), SplitMix64Next(state)) << "b_" << i;
  }
  ASSERT_OK_AND_ASSIGN(MinHasher other, MinHasher::Create(128, 2025));
  EXPECT_NE(h.a(0), other.a(0));
  EXPECT_NE(h.a(5), h.a(6));
}

// Against a brute-force minimum over 1000 shingles, given in random order.
TEST(SignHidden, PerFunctionMinimumOverTheWholeSet) {
  std::mt19937_64 rng(11);
  std::vector<uint64_t> set(1000);
  for (auto& x : set) x = rng();
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(64, 5));
  const Signature sig = h.Sign(set);
  ASSERT_EQ(sig.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    uint64_t want = kEmptyMin;
    for (uint64_t x : set) want = std::min(want, h.a(i) * x + h.b(i));
    EXPECT_EQ(sig[i], want) << "position " << i;
  }
  std::shuffle(set.begin(), set.end(), rng);
  EXPECT_EQ(h.Sign(set), sig) << "a signature must not depend on the order of the shingles";
}

TEST(SignHidden, EmptyAndSingletonSets) {
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(16, 9));
  EXPECT_EQ(h.Sign({}), Signature(16, kEmptyMin));
  const Signature one = h.Sign({12345});
  for (int i = 0; i < 16; ++i) EXPECT_EQ(one[i], h.a(i) * 12345u + h.b(i));
}

TEST(EstimateJaccardHidden, FractionOfEqualPositions) {
  ASSERT_OK_AND_ASSIGN(double half, EstimateJaccard({1, 2, 3, 4}, {1, 0, 3, 0}));
  EXPECT_DOUBLE_EQ(half, 0.5);
  ASSERT_OK_AND_ASSIGN(double none, EstimateJaccard({1, 2, 3}, {4, 5, 6}));
  EXPECT_DOUBLE_EQ(none, 0.0);
  EXPECT_EQ(EstimateJaccard({1, 2, 3}, {1, 2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EstimateJaccard({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

// The statistical test (notes/03-dedup.md, "standard error"): 400 pairs with J spread over (0, 1), k = 128,
// fixed seeds. z = (estimate - J) / sqrt(J (1 - J) / k) is approximately standard normal, so
//   - about 95 % of |z| are below 2 (we ask for >= 90 %), none above 5;
//   - the mean of z^2 is about 1 (we ask for 0.7 .. 1.4): errors neither too large nor suspiciously small.
TEST(EstimateJaccardHidden, ErrorMatchesStandardError) {
  std::mt19937_64 rng(1234);
  constexpr int kPairs = 400, k = 128;
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, 77));
  int within2 = 0, beyond5 = 0;
  double sum_z2 = 0;
  std::vector<uint64_t> a, b;
  for (int p = 0; p < kPairs; ++p) {
    const int common = 5 + p % 190, only_a = 100 - (p % 190) / 2, only_b = 5 + (p * 7) % 60;
    MakePair(rng, common, only_a, only_b, a, b);
    const double j = static_cast<double>(common) / (common + only_a + only_b);
    ASSERT_OK_AND_ASSIGN(double est, EstimateJaccard(h.Sign(a), h.Sign(b)));
    const double z = (est - j) / std::sqrt(j * (1 - j) / k);
    within2 += std::abs(z)<2, beyond5 += std::abs(z)> 5;
    sum_z2 += z * z;
  }
  EXPECT_GE(within2, 0.90 * kPairs);
  EXPECT_EQ(beyond5, 0);
  EXPECT_GT(sum_z2 / kPairs, 0.7);
  EXPECT_LT(sum_z2 / kPairs, 1.4);
}

// Pr[min agrees] = J for EACH function: over 300 pairs at J = 0.25, every position agrees about 75 times.
TEST(EstimateJaccardHidden, EveryPositionAgreesWithProbabilityJ) {
  std::mt19937_64 rng(99);
  constexpr int kPairs = 300, k = 32;
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(k, 3));
  std::vector<int> agree(k, 0);
  std::vector<uint64_t> a, b;
  for (int p = 0; p < kPairs; ++p) {
    MakePair(rng, 40, 60, 60, a, b);  // J = 40 / 160 = 0.25
    const Signature x = h.Sign(a), y = h.Sign(b);
    for (int i = 0; i < k; ++i) agree[i] += x[i] == y[i];
  }
  const double mean = kPairs * 0.25, sd = std::sqrt(kPairs * 0.25 * 0.75);  // 75 and 7.5
  for (int i = 0; i < k; ++i) EXPECT_NEAR(agree[i], mean, 4.5 * sd) << "position " << i;
}

// Different positions are different functions: their agreements are not all-or-nothing.
TEST(EstimateJaccardHidden, PositionsAreNotCopiesOfEachOther) {
  std::mt19937_64 rng(5);
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(128, 8));
  std::vector<uint64_t> a, b;
  int strictly_between = 0;
  for (int p = 0; p < 50; ++p) {
    MakePair(rng, 50, 50, 50, a, b);  // J = 1/3
    ASSERT_OK_AND_ASSIGN(double est, EstimateJaccard(h.Sign(a), h.Sign(b)));
    strictly_between += est > 0.05 && est < 0.95;
  }
  EXPECT_EQ(strictly_between, 50);
}

TEST(SignAllHidden, SameResultForEveryThreadCount) {
  std::mt19937_64 rng(21);
  std::vector<std::vector<uint64_t>> sets(500);
  for (auto& s : sets) {
    s.resize(rng() % 300);
    for (auto& x : s) x = rng();
  }
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(128, 1));
  ASSERT_OK_AND_ASSIGN(auto one, SignAll(h, sets, 1));
  ASSERT_EQ(one.size(), sets.size());
  for (size_t d = 0; d < sets.size(); d += 37) EXPECT_EQ(one[d], h.Sign(sets[d])) << "document " << d;
  for (int threads : {0, 2, 3, 8}) {
    ASSERT_OK_AND_ASSIGN(auto many, SignAll(h, sets, threads));
    EXPECT_EQ(many, one) << threads << " threads";
  }
}

TEST(SignAllHidden, EdgeCases) {
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(8, 1));
  ASSERT_OK_AND_ASSIGN(auto none, SignAll(h, {}, 4));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(auto few, SignAll(h, {{1}, {2, 3}}, 16));  // more threads than documents
  ASSERT_EQ(few.size(), 2u);
  EXPECT_EQ(few[1], h.Sign({2, 3}));
  EXPECT_EQ(SignAll(h, {{1}}, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::dedup
