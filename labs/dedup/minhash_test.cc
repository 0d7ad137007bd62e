// Public tests, Lab 3 stage B: the hash family, signatures, the estimator.
#include "labs/dedup/minhash.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

// k = 3, seed 9: coefficients come from ONE SplitMix64 stream, in the order a_0 b_0 a_1 b_1 a_2 b_2.
TEST(MinHasher, CoefficientsFromOneStream) {
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(3, 9));
  uint64_t state = 9;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h.a(i), SplitMix64Next(state) | 1) << "a_" << i;
    EXPECT_EQ(h.b(i), SplitMix64Next(state)) << "b_" << i;
  }
}

// sig[i] = min(a_i x + b_i) over the set: here, by hand, for the set {10, 20, 30}.
TEST(MinHasher, SignatureIsPerFunctionMinimum) {
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(4, 1));
  const Signature sig = h.Sign({10, 20, 30});
  ASSERT_EQ(sig.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    uint64_t want = kEmptyMin;
    for (uint64_t x : {10, 20, 30}) want = std::min(want, h.a(i) * x + h.b(i));
    EXPECT_EQ(sig[i], want) << "position " << i;
  }
}

// A = {0..99}, B = {50..149}: J = 50 / 150 = 1/3. With k = 256 the standard error is
// sqrt(J (1 - J) / k) ≈ 0.029; the estimate should sit within 4 standard errors.
TEST(EstimateJaccard, WithinFourStandardErrors) {
  std::vector<uint64_t> a, b;
  for (uint64_t x = 0; x < 100; ++x) a.push_back(x * 0x9E3779B97F4A7C15ULL);
  for (uint64_t x = 50; x < 150; ++x) b.push_back(x * 0x9E3779B97F4A7C15ULL);
  ASSERT_OK_AND_ASSIGN(MinHasher h, MinHasher::Create(256, 42));
  ASSERT_OK_AND_ASSIGN(double est, EstimateJaccard(h.Sign(a), h.Sign(b)));
  const double j = 1.0 / 3.0;
  EXPECT_NEAR(est, j, 4 * std::sqrt(j * (1 - j) / 256));
}

}  // namespace
}  // namespace distlab::dedup
