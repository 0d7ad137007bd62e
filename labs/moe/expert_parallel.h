// Lab 6 (moe), stage C: expert parallelism -- the experts live on different ranks and tokens travel to them.
//
// Vocabulary: n = ranks of the expert-parallel group, E = experts (E % n == 0), E/n experts per rank:
// rank r owns experts [r E/n, (r+1) E/n). T = this rank's tokens, h = hidden size.
//
// Each rank routes its own tokens (the router is replicated); a kept slot (t, j) of rank r is computed by
// the owner of expert[t, j], and the result equals the single-rank layer's on the same routing (tests
// compare them): y[t] = x[t] + sum over kept j of gate[t, j] * Expert_{expert[t, j]}(x[t]).
//
// The layout of the exchanges (NCCL's all-to-all-v pattern; the layout is the lab's, and the public tests
// check what a local expert receives):
//   - rows: the message to a peer holds my kept slots' rows ordered by expert, then by token; dropped slots
//     travel nowhere;
//   - a local expert runs once per forward, on the rows every peer sent it: peer 0's first, then peer 1's,
//     ..., each peer's in its token order;
//   - counts: the per-expert row counts travel in a comm::Comm::AllToAll of E/n int32 per peer:
//     send_counts[e] = my kept slots of expert e (global index: peer p's part is [p E/n, (p+1) E/n)), and
//     recv_counts[p E/n + j] = the rows peer p sends to my local expert j.
// EpStats counts the rows that cross to another rank (a rank's own rows stay local).
//
// Backward (ExpertParallelBackward): the gradients of the forward's kept slots, computed where each factor
// lives. Each local expert's backward runs on its owner, once, on the gradients of the rows it returned, in
// the order it returned them, so its parameter gradients on its owner sum every rank's tokens (and stay 0
// elsewhere). The router's share is not computed here: the caller runs RouterBackward(routing, dgate) and the
// replicated router's backward on the token's rank (the router is data-parallel, so its weight gradients are
// all-reduced across the ranks like any replicated parameter's).
#ifndef DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_
#define DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/moe/moe_layer.h"
#include "reference/comm/comm.h"

namespace distlab::moe {

// Runs local expert `expert` (a global id this rank owns) on rows [R, h]; returns [R, h]. Not called when a
// local expert receives no rows.
using ExpertFn = std::function<Tensor(int expert, const Tensor& rows)>;

// The backward of local expert `expert`: drows [R, h] is the gradient of the rows it returned in the last
// forward, in the same order; returns the input gradient [R, h] and accumulates the expert's parameter
// gradients (nn::Mlp::Backward does both). Called exactly for the experts the forward ran.
using ExpertBackwardFn = std::function<Tensor(int expert, const Tensor& drows)>;

// What ExpertParallelForward keeps for ExpertParallelBackward. Its contents are yours to define in
// expert_parallel.cc; one cache serves one forward/backward.
struct EpCache {
  struct Impl;
  std::shared_ptr<Impl> impl;
};

// The gradients of ExpertParallelBackward, on the token's rank.
struct EpGrads {
  Tensor dx;                 // [T, h]: dL/dx through the residual and the experts; not the router's share
  std::vector<float> dgate;  // [T, k]: dL/dgate[t, j]; 0 for dropped slots
};

struct EpStats {
  int64_t rows_sent = 0;      // rows this rank dispatched to other ranks (its own rows stay local)
  int64_t rows_received = 0;  // rows other ranks dispatched to this rank
};

// x [T, h], routing of x (capacity already applied). Every rank of `comm` calls it with its own tokens.
// Errors: InvalidArgument for E % n != 0 or shapes that disagree; communication errors as the runtime
// reports them.
// With `cache` non-null, keeps what ExpertParallelBackward needs.
absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing,
                                             const ExpertFn& local_expert, comm::Comm& comm,
                                             comm::Stream& stream, EpStats* stats = nullptr,
                                             EpCache* cache = nullptr);

// dy [T, h]: the gradient of this rank's forward output; routing and cache: those of that forward. Every rank
// of `comm` calls it. stats (may be null) counts the gradient rows that cross to another rank, as the forward
// counted the tokens (the same numbers).
// Errors: FailedPrecondition when the cache holds no forward; InvalidArgument when dy is not [T, h] of that
// forward; communication errors as the runtime reports them.
absl::StatusOr<EpGrads> ExpertParallelBackward(const Tensor& dy, const Routing& routing, const EpCache& cache,
                                               const ExpertBackwardFn& local_expert_backward,
                                               comm::Comm& comm, comm::Stream& stream,
                                               EpStats* stats = nullptr);

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_
