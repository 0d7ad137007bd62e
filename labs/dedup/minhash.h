// Lab 3 (dedup), stage B: MinHash signatures and the Jaccard estimator.
//
// Vocabulary: k = number of hash functions (signature length); x = a 64-bit shingle hash (shingle.h);
// h_i(x) = a_i * x + b_i (mod 2^64) with a_i odd, i = 0..k-1, one seeded family; sig[i] = min over the
// set of h_i(x). Because a_i is odd, each h_i is a bijection on 64-bit values, so distinct shingles never
// tie. Why an equal minimum estimates J(A, B): notes/03-dedup.md §2.1.
#ifndef DISTLAB_LABS_DEDUP_MINHASH_H_
#define DISTLAB_LABS_DEDUP_MINHASH_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::dedup {

using Signature = std::vector<uint64_t>;  // [k]

// The value of the signature of an empty set at every position: the identity of min.
inline constexpr uint64_t kEmptyMin = std::numeric_limits<uint64_t>::max();

// SplitMix64: advances `state` and returns the next 64-bit value of the stream. MinHasher::Create reads the
// family's coefficients off this stream.
inline uint64_t SplitMix64Next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class MinHasher {
 public:
  // k >= 1 hash functions drawn from `seed`. Call v_1, v_2, v_3, ... the values SplitMix64Next returns on a
  // state that starts at `seed`; the coefficients are the first 2k of them, in this order:
  //   a_0 = v_1 | 1, b_0 = v_2, a_1 = v_3 | 1, b_1 = v_4, ..., a_{k-1} = v_{2k-1} | 1, b_{k-1} = v_{2k}
  // (| 1 sets the lowest bit: a_i odd). k < 1 is an InvalidArgument error.
  static absl::StatusOr<MinHasher> Create(int k, uint64_t seed);

  int k() const { return static_cast<int>(a_.size()); }
  uint64_t a(int i) const { return a_[i]; }
  uint64_t b(int i) const { return b_[i]; }

  // sig[i] = min over x in `shingles` of a_i * x + b_i (mod 2^64); kEmptyMin everywhere for an empty set.
  Signature Sign(const std::vector<uint64_t>& shingles) const;

 private:
  MinHasher() = default;
  std::vector<uint64_t> a_;  // [k], odd
  std::vector<uint64_t> b_;  // [k]
};

// The estimator of J: the fraction of positions where the signatures agree (its mean and its standard error:
// notes/03-dedup.md §2.3). Signatures of different lengths (or empty) are an InvalidArgument error.
absl::StatusOr<double> EstimateJaccard(const Signature& x, const Signature& y);

// Signs every set of a corpus with `threads` worker threads (0 = std::thread::hardware_concurrency()).
// The result is identical for every thread count: out[d] = hasher.Sign(sets[d]). threads < 0 is an error.
absl::StatusOr<std::vector<Signature>> SignAll(const MinHasher& hasher,
                                               const std::vector<std::vector<uint64_t>>& sets,
                                               int threads = 0);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_MINHASH_H_
