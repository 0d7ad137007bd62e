// Lab 3 stage C, reference solution: the S-curve, the (b, r) picker, candidate pairs from band keys.
#include "labs/dedup/lsh.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

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

constexpr int kIntervals = 1000;  // of composite Simpson's rule, on each side of the threshold

// Simpson's weight of grid point i of kIntervals (without the h / 3): 1, 4, 2, 4, ..., 2, 4, 1.
double SimpsonWeight(int i) { return i == 0 || i == kIntervals ? 1.0 : i % 2 == 1 ? 4.0 : 2.0; }

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
  // FP(b, r) = ∫_0^t SCurve(s) ds and FN(b, r) = ∫_t^1 (1 - SCurve(s)) ds for every b x r <= k: about
  // k ln k bandings (600 at k = 128). Integrated one banding at a time that is two pow calls per grid point
  // per banding, 2.4 million at k = 128, and the tool would spend 40 ms here on every run. Instead one sweep
  // of each grid serves them all: at a point s, s^r grows by one factor of s per r, and for a given r the
  // curves of b = 1, 2, ... share q = 1 - s^r, their miss probability q^b growing by one factor of q per b.
  // fp[r][b - 1] and fn[r][b - 1] sum Simpson's weights times the integrands; they differ from sums of pow
  // calls in the last bits only.
  std::vector<std::vector<double>> fp(k + 1), fn(k + 1);
  for (int r = 1; r <= k; ++r) fp[r].assign(k / r, 0.0), fn[r].assign(k / r, 0.0);
  auto sweep = [&](double lo, double hi, bool below, std::vector<std::vector<double>>& area) {
    const double h = (hi - lo) / kIntervals;
    for (int i = 0; i <= kIntervals; ++i) {
      const double s = lo + i * h, w = SimpsonWeight(i) * h / 3.0;
      double s_r = 1.0;
      for (int r = 1; r <= k; ++r) {
        s_r *= s;
        const double q = 1.0 - s_r;  // one band of r rows misses
        double miss = 1.0;
        for (double& a : area[r]) {
          miss *= q;  // all b bands miss: q^b
          a += w * (below ? 1.0 - miss : miss);
        }
      }
    }
  };
  sweep(0.0, threshold, true, fp);
  sweep(threshold, 1.0, false, fn);
  Banding best{1, 1};
  double best_cost = INFINITY;
  for (int b = 1; b <= k; ++b) {  // the header's scan order, so that ties go the same way
    for (int r = 1; r <= k / b; ++r) {
      const double cost = fp_weight * fp[r][b - 1] + fn_weight * fn[r][b - 1];
      if (cost < best_cost) best_cost = cost, best = Banding{b, r};
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
