// Lab 6 (moe), stage D: load balance and per-domain specialization -- your implementation.
//
// Read labs/moe/routing_stats.h and notes/06-moe.md section 4.
#include "labs/moe/routing_stats.h"

#include "reference/base/status.h"

namespace distlab::moe {

// TODO(moe stage D): ComputeRoutingStats -- contract: routing_stats.h (the formulas, RoutingStats, the
//   errors); idea: notes/06-moe.md §4. std::log2; a share of 0 adds 0 to an entropy.
absl::StatusOr<RoutingStats> ComputeRoutingStats(const Routing& routing, const std::vector<int>& domain,
                                                 int domains) {
  return Unimplemented("moe", "D", "ComputeRoutingStats");
}

}  // namespace distlab::moe
