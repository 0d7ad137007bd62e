// Lab 3 (dedup), stage C (first half): locality-sensitive hashing by banding.
//
// Vocabulary: a signature of k values is cut into b bands of r rows (b * r <= k; rows past b * r are unused);
// band j covers rows [j * r, (j + 1) * r). Two documents are a candidate pair when their signatures are
// equal, position by position, on all r rows of at least one band. s = J(A, B) of the pair. How likely that
// is, and where the curve is steep: notes/03-dedup.md §3.1-3.2.
#ifndef DISTLAB_LABS_DEDUP_LSH_H_
#define DISTLAB_LABS_DEDUP_LSH_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "minhash.h"

namespace distlab::dedup {

struct Banding {
  int bands = 0;  // b
  int rows = 0;   // r
};

// OK when b >= 1, r >= 1 and b * r <= k; otherwise InvalidArgument naming b, r and k.
absl::Status ValidateBanding(const Banding& banding, int k);

// The S-curve: Pr[candidate] for two documents of similarity s in [0, 1] under `banding`, when each row of
// their signatures agrees with probability s, independently of the other rows. Exact (no sampling).
double SCurve(double s, const Banding& banding);

// The banding's threshold: the similarity s at which ONE given band agrees with probability exactly 1/b (near
// there the S-curve is steepest).
double BandingThreshold(const Banding& banding);

// The (b, r) with b * r <= k minimising
//     fp_weight * ∫_0^t SCurve(s) ds  +  fn_weight * ∫_t^1 (1 - SCurve(s)) ds
// (false-positive area below the threshold t, false-negative area above it), each integral by composite
// Simpson's rule with 1000 intervals (or finer). Scan b = 1..k, r = 1..k/b; on equal cost keep the first.
// Errors (InvalidArgument): threshold outside (0, 1], k < 1, a negative weight, or both weights zero.
absl::StatusOr<Banding> PickBanding(double threshold, int k, double fp_weight = 0.5, double fn_weight = 0.5);

// Candidate pairs (i, j), i < j, sorted and without repeats: the candidate pairs of the vocabulary above.
// No signatures: no pairs. Errors (InvalidArgument): ValidateBanding fails for the signatures' k, or the
// signatures differ in length.
absl::StatusOr<std::vector<std::pair<int, int>>> CandidatePairs(const std::vector<Signature>& signatures,
                                                                const Banding& banding);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_LSH_H_
