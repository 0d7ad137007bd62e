// Lab 3 (dedup), stage C: banding. Your code goes here.
#include "labs/dedup/lsh.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage C): ValidateBanding -- b >= 1, r >= 1, b * r <= k, else InvalidArgument naming b, r, k.
absl::Status ValidateBanding(const Banding& banding, int k) {
  return distlab::Unimplemented("dedup", "C", "ValidateBanding");
}

// TODO(dedup stage C): SCurve -- 1 - (1 - s^r)^b.
double SCurve(double s, const Banding& banding) {
  throw distlab::NotImplementedError("dedup", "C", "SCurve");
}

// TODO(dedup stage C): BandingThreshold -- (1/b)^(1/r).
double BandingThreshold(const Banding& banding) {
  throw distlab::NotImplementedError("dedup", "C", "BandingThreshold");
}

// TODO(dedup stage C): PickBanding.
//   1. Errors: threshold outside (0, 1], k < 1, negative weights, both weights zero.
//   2. For b = 1..k, r = 1..k/b: FP = ∫_0^t SCurve, FN = ∫_t^1 (1 - SCurve) (Simpson, >= 1000 intervals);
//      keep the first (b, r) of least fp_weight * FP + fn_weight * FN.
//   Cases (equal weights, k = 128): t = 0.9 -> (5, 25); t = 0.5 -> (25, 5).
absl::StatusOr<Banding> PickBanding(double threshold, int k, double fp_weight, double fn_weight) {
  return distlab::Unimplemented("dedup", "C", "PickBanding");
}

// TODO(dedup stage C): CandidatePairs.
//   1. No signatures -> no pairs. Errors: ValidateBanding(banding, k) fails; signatures of different lengths.
//   2. For each band j: key = a hash of rows [j*r, (j+1)*r) (e.g. XXH3_64bits over those r values); documents
//      with equal keys IN THE SAME BAND are candidates. Keep one table per band.
//   3. Return the pairs (i < j) sorted, each once.
absl::StatusOr<std::vector<std::pair<int, int>>> CandidatePairs(const std::vector<Signature>& signatures,
                                                                const Banding& banding) {
  return distlab::Unimplemented("dedup", "C", "CandidatePairs");
}

}  // namespace distlab::dedup
