// Lab 3 stage B, reference solution: the seeded hash family, signatures, the estimator, parallel signing.
#include "labs/dedup/minhash.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"

namespace distlab::dedup {

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
  const int k = this->k();
  Signature sig(k, kEmptyMin);
  const uint64_t* a = a_.data();
  const uint64_t* b = b_.data();
  uint64_t* out = sig.data();
  // Shingles outside, functions inside: the inner loop is k independent multiply-add-min lanes, which the
  // compiler can vectorize; unsigned overflow is the intended "mod 2^64".
  for (const uint64_t x : shingles) {
    for (int i = 0; i < k; ++i) out[i] = std::min(out[i], a[i] * x + b[i]);
  }
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
