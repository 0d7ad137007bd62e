// Lab 3 stage C, reference solution: the S-curve, the (b, r) picker, candidate pairs from band keys.
#include "labs/dedup/lsh.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "xxhash.h"

namespace distlab::dedup {

absl::Status ValidateBanding(const Banding& banding, int k) {
  const int b = banding.bands, r = banding.rows;
  if (b < 1 || r < 1 || static_cast<int64_t>(b) * r > k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "banding b = ", b, " bands x r = ", r, " rows with k = ", k, ": need b >= 1, r >= 1 and b * r <= k"));
  }
  return absl::OkStatus();
}

double SCurve(double s, const Banding& banding) {
  // One band matches with probability s^r (r independent agreements); all b bands miss with (1 - s^r)^b.
  return 1.0 - std::pow(1.0 - std::pow(s, banding.rows), banding.bands);
}

double BandingThreshold(const Banding& banding) { return std::pow(1.0 / banding.bands, 1.0 / banding.rows); }

namespace {

// Composite Simpson's rule of f over [lo, hi] with an even number of intervals.
template <typename F>
double Simpson(F f, double lo, double hi, int intervals = 1000) {
  const double h = (hi - lo) / intervals;
  double sum = f(lo) + f(hi);
  for (int i = 1; i < intervals; ++i) sum += (i % 2 == 1 ? 4.0 : 2.0) * f(lo + i * h);
  return sum * h / 3.0;
}

}  // namespace

absl::StatusOr<Banding> PickBanding(double threshold, int k, double fp_weight, double fn_weight) {
  if (!(threshold > 0.0 && threshold <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("threshold = ", threshold, ": must be in (0, 1]"));
  }
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("k = ", k, ": must be >= 1"));
  if (fp_weight < 0 || fn_weight < 0 || fp_weight + fn_weight <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights fp = ", fp_weight, ", fn = ", fn_weight, ": must be >= 0 and not both zero"));
  }
  Banding best{1, 1};
  double best_cost = INFINITY;
  for (int b = 1; b <= k; ++b) {
    for (int r = 1; r <= k / b; ++r) {
      const Banding cand{b, r};
      const double fp = Simpson([&](double s) { return SCurve(s, cand); }, 0.0, threshold);
      const double fn = Simpson([&](double s) { return 1.0 - SCurve(s, cand); }, threshold, 1.0);
      const double cost = fp_weight * fp + fn_weight * fn;
      if (cost < best_cost) best_cost = cost, best = cand;
    }
  }
  return best;
}

absl::StatusOr<std::vector<std::pair<int, int>>> CandidatePairs(const std::vector<Signature>& signatures,
                                                                const Banding& banding) {
  std::vector<std::pair<int, int>> pairs;
  if (signatures.empty()) return pairs;
  const int k = static_cast<int>(signatures[0].size());
  if (absl::Status s = ValidateBanding(banding, k); !s.ok()) return s;
  for (size_t d = 0; d < signatures.size(); ++d) {
    if (static_cast<int>(signatures[d].size()) != k) {
      return absl::InvalidArgumentError(absl::StrCat("signature ", d, " has ", signatures[d].size(),
                                                     " values, signature 0 has ", k,
                                                     ": all need the same k"));
    }
  }
  const int n = static_cast<int>(signatures.size());
  const int r = banding.rows;
  // One table per band, so keys of different bands never meet. The key hashes rows [j r, (j + 1) r); a
  // 64-bit collision could only add a candidate, which verification then rejects.
  for (int j = 0; j < banding.bands; ++j) {
    std::unordered_map<uint64_t, std::vector<int>> buckets;
    buckets.reserve(n);
    for (int d = 0; d < n; ++d) {
      const uint64_t key =
          XXH3_64bits(signatures[d].data() + static_cast<size_t>(j) * r, sizeof(uint64_t) * r);
      buckets[key].push_back(d);
    }
    for (const auto& [key, docs] : buckets) {
      for (size_t x = 0; x < docs.size(); ++x) {
        for (size_t y = x + 1; y < docs.size(); ++y) pairs.emplace_back(docs[x], docs[y]);  // docs ascending
      }
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

}  // namespace distlab::dedup
