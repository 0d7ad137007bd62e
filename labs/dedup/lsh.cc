// Lab 3 (dedup), stage C: banding. Your code goes here.
#include "labs/dedup/lsh.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage C): ValidateBanding -- contract: lsh.h (ValidateBanding).
//   Errors: as the header lists, one InvalidArgument whose message names b, r and k.
absl::Status ValidateBanding(const Banding& banding, int k) {
  return distlab::Unimplemented("dedup", "C", "ValidateBanding");
}

// TODO(dedup stage C): SCurve -- contract: lsh.h (SCurve); idea: notes/03-dedup.md §3.1 (its exercise).
//   What is the chance that one given band agrees, and that none of the b bands does?
double SCurve(double s, const Banding& banding) {
  throw distlab::NotImplementedError("dedup", "C", "SCurve");
}

// TODO(dedup stage C): BandingThreshold -- contract: lsh.h (BandingThreshold); idea: notes/03-dedup.md §3.2.
double BandingThreshold(const Banding& banding) {
  throw distlab::NotImplementedError("dedup", "C", "BandingThreshold");
}

// TODO(dedup stage C): PickBanding -- contract: lsh.h (PickBanding); idea: notes/03-dedup.md §3.3.
//   Your SCurve is the integrand; add a small Simpson helper in an anonymous namespace of this file.
//   Errors: as the header lists, each InvalidArgument naming the value at fault.
//   Two bandings can cost almost the same: which one does the header's scan keep?
absl::StatusOr<Banding> PickBanding(double threshold, int k, double fp_weight, double fn_weight) {
  return distlab::Unimplemented("dedup", "C", "PickBanding");
}

// TODO(dedup stage C): CandidatePairs -- contract: lsh.h (CandidatePairs); idea: notes/03-dedup.md §3.1.
//   xxhash.h (XXH3_64bits hashes any run of bytes, e.g. r consecutive uint64_t) and std::unordered_map are
//   there for bucketing. Errors: as the header lists.
//   Two different runs of r values can hash to one 64-bit key by chance: what does that cost downstream?
absl::StatusOr<std::vector<std::pair<int, int>>> CandidatePairs(const std::vector<Signature>& signatures,
                                                                const Banding& banding) {
  return distlab::Unimplemented("dedup", "C", "CandidatePairs");
}

}  // namespace distlab::dedup
