// Lab 6 (moe), stage C: expert parallelism -- your implementation.
//
// Read labs/moe/expert_parallel.h and notes/06-moe.md section 3. Runtime pieces you need:
// comm::Comm::AllToAll (the counts), Send/Recv inside comm::Grouped (the rows; sizes differ per peer, and
// Grouped opens the group, runs your calls and always closes it), Stream::Synchronize.
#include "labs/moe/expert_parallel.h"

#include "reference/base/status.h"

namespace distlab::moe {

// Your state between a forward and its backward: what ExpertParallelBackward needs to replay the exchanges
// (my slots per expert, rows per peer both ways, where each local expert's rows sit in the received block)
// and the expert outputs that came back (for dgate). ExpertParallelForward creates it with std::make_shared.
struct EpCache::Impl {};

// TODO(moe stage C): ExpertParallelForward
//  1. InvalidArgument when E % n != 0 or x is not [T, h] for routing's T.
//  2. Group my kept slots by expert (token order inside). send_counts[e] = their number.
//  3. Counts first: AllToAll of E/n int32 per peer; recv_counts[p*E/n + j] = rows from p for my expert j.
//  4. Rows: pack in (expert, token) order; exchange with Send/Recv inside one group (copy your own block;
//     skip empty messages -- both sides know they are empty from the counts).
//  5. Run each local expert once on its rows from all peers (skip an expert with none).
//  6. Send the results back along the reverse path, then combine in the original order:
//     y = x; y[t] += gate[t, j] * result of slot (t, j).
//  7. Fill *stats when given (rows to/from other ranks only).
//  8. With cache non-null, set cache->impl to what ExpertParallelBackward needs (see EpCache::Impl above).
absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing,
                                             const ExpertFn& local_expert, comm::Comm& comm,
                                             comm::Stream& stream, EpStats* stats, EpCache* cache) {
  return Unimplemented("moe", "C", "ExpertParallelForward");
}

// TODO(moe stage C): ExpertParallelBackward
//  1. FailedPrecondition when cache.impl is null; InvalidArgument when dy is not [T, h] of the cached
//  forward.
//  2. On this (the token's) rank, walking the slots in the forward's send order: dgate[t, j] = dy[t] . out
//     (the expert output that came back in the forward), and the expert's output-gradient row gate[t, j] *
//     dy[t] (dropped slots: dgate 0, no row).
//  3. Send those rows to the experts' ranks: the same sizes as the forward's dispatch (no counts exchange).
//  4. Each local expert that ran in the forward: local_expert_backward(e, its rows in the forward's order);
//     it accumulates the expert's parameter gradients on this, the owning, rank.
//  5. Send the input-gradient rows back (the forward's return sizes); dx = dy (the residual), then
//     dx[t] += the row of each kept slot (t, j). The router's share is not yours here: the caller runs
//     RouterBackward(routing, dgate) and the router's backward on this rank.
//  6. Fill *stats when given, as in the forward.
absl::StatusOr<EpGrads> ExpertParallelBackward(const Tensor& dy, const Routing& routing, const EpCache& cache,
                                               const ExpertBackwardFn& local_expert_backward,
                                               comm::Comm& comm, comm::Stream& stream, EpStats* stats) {
  return Unimplemented("moe", "C", "ExpertParallelBackward");
}

}  // namespace distlab::moe
