// Lab 3 stage B, reference solution: the seeded hash family, signatures, the estimator, parallel signing.
#include "labs/dedup/minhash.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>

#include "absl/strings/str_cat.h"

namespace distlab::dedup {

namespace {

// out[i] = min(out[i], min over the n shingles x of a[i] x + b[i]) for i < k, mod 2^64. The plain loop:
// shingles outside, functions inside, so the inner loop is k independent multiply-add-min lanes; unsigned
// overflow is the intended "mod 2^64". Compilers keep it scalar (a 64-bit multiply has no SSE2 form), about
// one multiply per cycle: k = 128 costs ~50 ns per shingle, several times XXH3 of the shingle itself.
void MinOfEachFunctionPortable(const uint64_t* a, const uint64_t* b, int k, const uint64_t* x, size_t n,
                               uint64_t* out) {
  for (size_t j = 0; j < n; ++j) {
    for (int i = 0; i < k; ++i) out[i] = std::min(out[i], a[i] * x[j] + b[i]);
  }
}

#if defined(__x86_64__)
// The same with AVX2, four 64-bit lanes per register and two registers per block of 8 functions, the block's
// minima kept in registers while every shingle streams past (functions outside, shingles inside).
// AVX2 has neither a 64-bit multiply nor an unsigned 64-bit min, so with a = a_hi 2^32 + a_lo and
// x = x_hi 2^32 + x_lo:
//   a x mod 2^64 = a_lo x_lo + ((a_hi x_lo + a_lo x_hi) mod 2^32) 2^32
// a_lo x_lo is one _mm256_mul_epu32 (32 x 32 -> 64 bits); both cross terms come from one 32-bit multiply of
// the word-swapped a by x (_mm256_mullo_epi32: low word a_hi x_lo, high word a_lo x_hi), whose two words
// are summed into the high word by p << 32 plus p's high word. The minimum is a signed compare on values
// offset by 2^63 (adding 2^63 mod 2^64 maps unsigned order onto signed order), folded into b, and undone
// when the block is stored. About 9 instructions per 4 hashes: ~7x the plain loop on a Zen 3 core.
__attribute__((target("avx2"))) void MinOfEachFunctionAvx2(const uint64_t* a, const uint64_t* b, int k,
                                                           const uint64_t* x, size_t n, uint64_t* out) {
  const __m256i offset = _mm256_set1_epi64x(static_cast<int64_t>(uint64_t{1} << 63));
  const __m256i high_words = _mm256_set1_epi64x(static_cast<int64_t>(0xffffffff00000000ULL));
  int i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i + 4));
    const __m256i swapped0 = _mm256_shuffle_epi32(a0, 0xB1), swapped1 = _mm256_shuffle_epi32(a1, 0xB1);
    const __m256i b0 = _mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)), offset);
    const __m256i b1 =
        _mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + 4)), offset);
    __m256i m0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + i)), offset);
    __m256i m1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + i + 4)), offset);
    for (size_t j = 0; j < n; ++j) {
      const __m256i xv = _mm256_set1_epi64x(static_cast<int64_t>(x[j]));
      const __m256i p0 = _mm256_mullo_epi32(swapped0, xv), p1 = _mm256_mullo_epi32(swapped1, xv);
      const __m256i cross0 = _mm256_add_epi64(_mm256_slli_epi64(p0, 32), _mm256_and_si256(p0, high_words));
      const __m256i cross1 = _mm256_add_epi64(_mm256_slli_epi64(p1, 32), _mm256_and_si256(p1, high_words));
      const __m256i v0 = _mm256_add_epi64(_mm256_add_epi64(_mm256_mul_epu32(a0, xv), cross0), b0);
      const __m256i v1 = _mm256_add_epi64(_mm256_add_epi64(_mm256_mul_epu32(a1, xv), cross1), b1);
      m0 = _mm256_blendv_epi8(m0, v0, _mm256_cmpgt_epi64(m0, v0));
      m1 = _mm256_blendv_epi8(m1, v1, _mm256_cmpgt_epi64(m1, v1));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_xor_si256(m0, offset));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 4), _mm256_xor_si256(m1, offset));
  }
  if (i < k) MinOfEachFunctionPortable(a + i, b + i, k - i, x, n, out + i);  // the last k mod 8 functions
}
#endif

// Picks the AVX2 loop where the processor has it (checked once), the plain one elsewhere: same result.
void MinOfEachFunction(const uint64_t* a, const uint64_t* b, int k, const uint64_t* x, size_t n,
                       uint64_t* out) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return MinOfEachFunctionAvx2(a, b, k, x, n, out);
#endif
  MinOfEachFunctionPortable(a, b, k, x, n, out);
}

}  // namespace

absl::StatusOr<MinHasher> MinHasher::Create(int k, uint64_t seed) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("k = ", k, " hash functions: k must be >= 1"));
  MinHasher hasher;
  hasher.a_.resize(k);
  hasher.b_.resize(k);
  // ONE stream for the whole family: each function gets its own coefficients. (Restarting the stream per
  // function would give k copies of the same function, and every signature position would agree or
  // disagree together: the estimate could only be 0 or 1.)
  uint64_t state = seed;
  for (int i = 0; i < k; ++i) {
    hasher.a_[i] = SplitMix64Next(state) | 1;  // odd: x -> a x + b is a bijection modulo 2^64
    hasher.b_[i] = SplitMix64Next(state);
  }
  return hasher;
}

Signature MinHasher::Sign(const std::vector<uint64_t>& shingles) const {
  Signature sig(k(), kEmptyMin);
  MinOfEachFunction(a_.data(), b_.data(), k(), shingles.data(), shingles.size(), sig.data());
  return sig;
}

absl::StatusOr<double> EstimateJaccard(const Signature& x, const Signature& y) {
  if (x.empty() || x.size() != y.size()) {
    return absl::InvalidArgumentError(absl::StrCat("signatures of lengths ", x.size(), " and ", y.size(),
                                                   ": both must have the same k >= 1"));
  }
  size_t equal = 0;
  for (size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
  return static_cast<double>(equal) / static_cast<double>(x.size());
}

absl::StatusOr<std::vector<Signature>> SignAll(const MinHasher& hasher,
                                               const std::vector<std::vector<uint64_t>>& sets, int threads) {
  if (threads < 0) return absl::InvalidArgumentError(absl::StrCat("threads = ", threads, ": must be >= 0"));
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<Signature> out(sets.size());
  // Workers take chunks of documents from a shared counter. Each document's signature depends only on its
  // own set and is written to its own slot, so the result cannot depend on who computed what.
  constexpr size_t kChunk = 64;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t begin; (begin = next.fetch_add(kChunk)) < sets.size();) {
      const size_t end = std::min(sets.size(), begin + kChunk);
      for (size_t d = begin; d < end; ++d) out[d] = hasher.Sign(sets[d]);
    }
  };
  const int n = static_cast<int>(std::min<size_t>(threads, (sets.size() + kChunk - 1) / kChunk));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

}  // namespace distlab::dedup
