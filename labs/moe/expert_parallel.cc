// Lab 6 (moe), stage C: expert parallelism -- your implementation.
//
// Read labs/moe/expert_parallel.h and notes/06-moe.md section 3. Runtime pieces you need:
// comm::Comm::AllToAll (the counts), Send/Recv inside comm::Grouped (the rows; sizes differ per peer, and
// Grouped opens the group, runs your calls and always closes it), Stream::Synchronize.
#include "labs/moe/expert_parallel.h"

#include "reference/base/status.h"

namespace distlab::moe {

// Yours to define: what ExpertParallelForward leaves for ExpertParallelBackward (std::make_shared makes one
// for EpCache::impl).
struct EpCache::Impl {};

// TODO(moe stage C): ExpertParallelForward -- contract: expert_parallel.h; idea: notes/06-moe.md §3
//   ("Expert parallelism"). A Recv must be posted with the count its Send carries (no eager buffering,
//   docs/design.md §3.2); a Send to yourself is allowed only inside a group with its Recv; buffers must live
//   until stream.Synchronize() returns. AllToAll carries the same count to every peer.
//   When does a rank learn how many rows each peer will send it?
absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing,
                                             const ExpertFn& local_expert, comm::Comm& comm,
                                             comm::Stream& stream, EpStats* stats, EpCache* cache) {
  return Unimplemented("moe", "C", "ExpertParallelForward");
}

// TODO(moe stage C): ExpertParallelBackward -- contract: expert_parallel.h (ExpertParallelBackward,
//   ExpertBackwardFn, EpGrads); idea: notes/06-moe.md §3 ("The backward of expert parallelism"). The same
//   runtime calls as the forward; the cache holds whatever your forward left there.
//   Which rank holds each factor of a slot's contribution to y, and which gradient does each factor need?
absl::StatusOr<EpGrads> ExpertParallelBackward(const Tensor& dy, const Routing& routing, const EpCache& cache,
                                               const ExpertBackwardFn& local_expert_backward,
                                               comm::Comm& comm, comm::Stream& stream, EpStats* stats) {
  return Unimplemented("moe", "C", "ExpertParallelBackward");
}

}  // namespace distlab::moe
