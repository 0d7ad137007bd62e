// Lab 3 (dedup), stage B: MinHash signatures. Your code goes here.
#include "labs/dedup/minhash.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage B): MinHasher::Create -- contract: minhash.h (MinHasher::Create);
//   idea: notes/03-dedup.md §2.2. SplitMix64Next (minhash.h) advances the state you pass it.
//   Errors: k < 1 is InvalidArgument naming k.
absl::StatusOr<MinHasher> MinHasher::Create(int k, uint64_t seed) {
  return distlab::Unimplemented("dedup", "B", "MinHasher::Create");
}

// TODO(dedup stage B): MinHasher::Sign -- contract: minhash.h (MinHasher::Sign);
//   idea: notes/03-dedup.md §2.1. uint64_t arithmetic wraps: that is the header's "mod 2^64".
//   Shingles outside and functions inside, or the reverse: does it change the result, or only the speed?
Signature MinHasher::Sign(const std::vector<uint64_t>& shingles) const {
  throw distlab::NotImplementedError("dedup", "B", "MinHasher::Sign");
}

// TODO(dedup stage B): EstimateJaccard -- contract: minhash.h (EstimateJaccard);
//   idea: notes/03-dedup.md §2.3.
//   Errors: signatures of different lengths, or empty ones, are InvalidArgument naming both lengths.
absl::StatusOr<double> EstimateJaccard(const Signature& x, const Signature& y) {
  return distlab::Unimplemented("dedup", "B", "EstimateJaccard");
}

// TODO(dedup stage B): SignAll -- contract: minhash.h (SignAll); idea: notes/03-dedup.md §2.4.
//   std::thread and std::atomic are yours; join every thread you start before returning. `hasher` and `sets`
//   are shared read-only; size the output before any worker writes into it.
//   What does each worker own, so that no schedule of the threads can change the result?
absl::StatusOr<std::vector<Signature>> SignAll(const MinHasher& hasher,
                                               const std::vector<std::vector<uint64_t>>& sets, int threads) {
  return distlab::Unimplemented("dedup", "B", "SignAll");
}

}  // namespace distlab::dedup
