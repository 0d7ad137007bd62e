// Lab 6 (moe), stage D: load balance and per-domain specialization -- your implementation.
//
// Read labs/moe/routing_stats.h and notes/06-moe.md section 4.
#include "labs/moe/routing_stats.h"

#include "reference/base/status.h"

namespace distlab::moe {

// TODO(moe stage D): ComputeRoutingStats
//  1. InvalidArgument for D < 1, domain.size() != T, a label outside [0, D).
//  2. load_i, share[d][i] over all T*k slots; max_over_mean = E * max_i load_i.
//  3. specialization and entropy_bits: means over the domains that have tokens (log base 2; 0 log 0 = 0).
//  4. T = 0: zeros everywhere.
absl::StatusOr<RoutingStats> ComputeRoutingStats(const Routing& routing, const std::vector<int>& domain,
                                                 int domains) {
  return Unimplemented("moe", "D", "ComputeRoutingStats");
}

}  // namespace distlab::moe
