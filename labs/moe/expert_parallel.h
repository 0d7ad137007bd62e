// Lab 6 (moe), stage C: expert parallelism -- the experts live on different ranks and tokens travel to them.
//
// Vocabulary: n = ranks of the expert-parallel group, E = experts (E % n == 0), E/n experts per rank:
// rank r owns experts [r E/n, (r+1) E/n). T = this rank's tokens, h = hidden size.
//
// Each rank routes its own tokens (the router is replicated), then:
//   1. counts: send_counts[e] = kept assignments of my tokens to expert e; an all-to-all of E/n counts per
//      peer tells every rank how many rows each peer will send to each of its experts. Counts go FIRST: a
//      receiver must know a message's size before it can post the receive.
//   2. dispatch: rows grouped by destination rank, then expert, then token; Send/Recv in one group.
//   3. experts: each local expert runs once on the rows of all peers for it.
//   4. return: the results go back along the reverse path (same sizes).
//   5. combine in the original token order: y[t] = x[t] + sum over kept j of gate[t, j] * out[t, j].
// The result equals the single-rank layer's on the same routing (tests compare them).
//
// Backward (ExpertParallelBackward) walks the same path the other way, with the counts of the forward (no
// second counts exchange: the sizes are those of the forward):
//   1. on the token's rank, per kept slot s = (t, j): dgate[s] = dy[t] . out_s (out_s = the expert output
//   that
//      came back in the forward) and the output gradient of the expert's row, gate[s] * dy[t];
//   2. those rows travel to the experts' ranks (the direction of the forward's dispatch);
//   3. each local expert runs its backward once, on its rows of every peer in the order of its forward, and
//      accumulates its parameter gradients there -- on the owning rank, summed over every rank's tokens;
//   4. the input gradients travel back (the direction of the forward's return);
//   5. dx[t] = dy[t] (residual) + the sum of the rows that came back for t's kept slots.
// The router's gradient is computed on the token's rank: RouterBackward(routing, dgate) gives dlogits, and
// the replicated router's backward adds W_r^T dlogits to dx -- the router is data-parallel, so its weight
// gradients are all-reduced across the ranks like any replicated parameter's.
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

// What ExpertParallelForward keeps for ExpertParallelBackward (the slots, the counts, the returned expert
// outputs). Its contents are yours to define in expert_parallel.cc; one cache serves one forward/backward.
struct EpCache {
  struct Impl;
  std::shared_ptr<Impl> impl;
};

// The gradients of ExpertParallelBackward, on the token's rank.
struct EpGrads {
  Tensor dx;  // [T, h]: dy (the residual) + the experts' input gradients; not the router's share
  std::vector<float> dgate;  // [T, k]: dL/dgate = dy[t] . out of slot (t, j); 0 for dropped slots
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
// of `comm` calls it. stats (may be null) counts the gradient rows as the forward counted the tokens.
// Errors: FailedPrecondition when the cache holds no forward; InvalidArgument when dy is not [T, h] of that
// forward; communication errors as the runtime reports them.
absl::StatusOr<EpGrads> ExpertParallelBackward(const Tensor& dy, const Routing& routing, const EpCache& cache,
                                               const ExpertBackwardFn& local_expert_backward,
                                               comm::Comm& comm, comm::Stream& stream,
                                               EpStats* stats = nullptr);

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_
