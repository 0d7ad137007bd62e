// Lab 6 (moe), stage D: what the router learned -- load balance and per-domain specialization.
//
// Vocabulary: T tokens, E experts, k top-k, D domains; domain[t] in [0, D).
//   load_i            = assignments to expert i / (k T)                      (over all T k slots)
//   max_over_mean     = max_i load_i / mean_i load_i = E max_i load_i        (1 = perfectly balanced)
//   share[d][i]       = domain d's assignments to expert i / (k T_d)
//   specialization_d  = max_i share[d][i]   (the share of domain d on its top expert; 1/E when spread evenly)
//   entropy_d         = -sum_i share[d][i] log2 share[d][i]   bits (0 = one expert, log2 E = uniform)
// The summary numbers average specialization_d and entropy_d over the domains that have tokens.
#ifndef DISTLAB_LABS_MOE_ROUTING_STATS_H_
#define DISTLAB_LABS_MOE_ROUTING_STATS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "labs/moe/moe_layer.h"

namespace distlab::moe {

struct RoutingStats {
  std::vector<double> load;                // [E]
  std::vector<std::vector<double>> share;  // [D][E]; a domain without tokens has a row of zeros
  double max_over_mean = 0;
  double specialization = 0;  // mean over domains with tokens
  double entropy_bits = 0;    // mean over domains with tokens
};

// Errors: InvalidArgument when domain.size() != T, a domain is outside [0, D), or D < 1.
absl::StatusOr<RoutingStats> ComputeRoutingStats(const Routing& routing, const std::vector<int>& domain,
                                                 int domains);

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_ROUTING_STATS_H_
