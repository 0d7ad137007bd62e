// Lab 6 stage D, reference solution: load balance and per-domain specialization of a routing.
#include "labs/moe/routing_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace distlab::moe {

absl::StatusOr<RoutingStats> ComputeRoutingStats(const Routing& routing, const std::vector<int>& domain,
                                                 int domains) {
  const int64_t T = routing.tokens;
  const int E = routing.experts, k = routing.top_k;
  if (domains < 1)
    return absl::InvalidArgumentError(absl::StrCat("ComputeRoutingStats: D = ", domains, " < 1"));
  if (static_cast<int64_t>(domain.size()) != T) {
    return absl::InvalidArgumentError(
        absl::StrCat("ComputeRoutingStats: ", domain.size(), " domain labels for T = ", T, " tokens"));
  }
  RoutingStats st;
  st.load.assign(E, 0.0);
  st.share.assign(domains, std::vector<double>(E, 0.0));
  std::vector<double> per_domain(domains, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const int d = domain[t];
    if (d < 0 || d >= domains) {
      return absl::InvalidArgumentError(
          absl::StrCat("ComputeRoutingStats: token ", t, " has domain ", d, ", outside [0, ", domains, ")"));
    }
    per_domain[d] += k;
    for (int j = 0; j < k; ++j) {
      const int e = routing.expert[t * k + j];
      st.load[e] += 1;
      st.share[d][e] += 1;
    }
  }
  if (T == 0) return st;
  double max_load = 0;
  for (int e = 0; e < E; ++e) max_load = std::max(max_load, st.load[e] /= static_cast<double>(k) * T);
  st.max_over_mean = max_load * E;  // mean load is 1/E
  int present = 0;
  for (int d = 0; d < domains; ++d) {
    if (per_domain[d] == 0) continue;
    ++present;
    double top = 0, h = 0;
    for (double& s : st.share[d]) {
      s /= per_domain[d];
      top = std::max(top, s);
      if (s > 0) h -= s * std::log2(s);
    }
    st.specialization += top;
    st.entropy_bits += h;
  }
  st.specialization /= present;
  st.entropy_bits /= present;
  return st;
}

}  // namespace distlab::moe
