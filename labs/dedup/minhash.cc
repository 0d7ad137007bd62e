// Lab 3 (dedup), stage B: MinHash signatures. Your code goes here.
#include "labs/dedup/minhash.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage B): MinHasher::Create.
//   1. k < 1 -> InvalidArgument naming k.
//   2. ONE SplitMix64 stream from `seed`: for i = 0..k-1, a_[i] = SplitMix64Next(state) | 1, then
//      b_[i] = SplitMix64Next(state). (A stream restarted per function gives k equal functions.)
absl::StatusOr<MinHasher> MinHasher::Create(int k, uint64_t seed) {
  return distlab::Unimplemented("dedup", "B", "MinHasher::Create");
}

// TODO(dedup stage B): MinHasher::Sign.
//   sig[i] = min over every x of a_[i] * x + b_[i] (uint64_t arithmetic wraps: that is the mod 2^64).
//   Empty set -> kEmptyMin at every position. Tip: loop over shingles outside, over i inside.
Signature MinHasher::Sign(const std::vector<uint64_t>& shingles) const {
  throw distlab::NotImplementedError("dedup", "B", "MinHasher::Sign");
}

// TODO(dedup stage B): EstimateJaccard -- (number of i with x[i] == y[i]) / k.
//   Different lengths or empty signatures -> InvalidArgument naming both lengths.
absl::StatusOr<double> EstimateJaccard(const Signature& x, const Signature& y) {
  return distlab::Unimplemented("dedup", "B", "EstimateJaccard");
}

// TODO(dedup stage B): SignAll with `threads` std::thread workers.
//   1. threads < 0 -> InvalidArgument; 0 -> std::thread::hardware_concurrency().
//   2. out[d] = hasher.Sign(sets[d]); hand out documents in chunks (an atomic counter works well); each
//      worker writes only its own slots, so the output is the same for every thread count.
//   3. Join every thread before returning.
absl::StatusOr<std::vector<Signature>> SignAll(const MinHasher& hasher,
                                               const std::vector<std::vector<uint64_t>>& sets, int threads) {
  return distlab::Unimplemented("dedup", "B", "SignAll");
}

}  // namespace distlab::dedup
