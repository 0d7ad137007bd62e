// Lab 6 stage C: expert parallelism -- the experts live on different ranks and tokens travel to them.
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
#ifndef DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_
#define DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_

#include <functional>

#include "absl/status/statusor.h"
#include "labs/moe/moe_layer.h"
#include "reference/comm/comm.h"

namespace distlab::moe {

// Runs local expert `expert` (a global id this rank owns) on rows [R, h]; returns [R, h]. Not called when a
// local expert receives no rows.
using ExpertFn = std::function<Tensor(int expert, const Tensor& rows)>;

struct EpStats {
  int64_t rows_sent = 0;      // rows this rank dispatched to other ranks (its own rows stay local)
  int64_t rows_received = 0;  // rows other ranks dispatched to this rank
};

// x [T, h], routing of x (capacity already applied). Every rank of `comm` calls it with its own tokens.
// Errors: InvalidArgument for E % n != 0 or shapes that disagree; communication errors as the runtime
// reports them.
absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing, const ExpertFn& local_expert,
                                             comm::Comm& comm, comm::Stream& stream, EpStats* stats = nullptr);

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_EXPERT_PARALLEL_H_
