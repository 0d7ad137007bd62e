// Lab 6 stage C: expert parallelism -- your implementation.
//
// Read labs/moe/expert_parallel.h and notes/06-moe.md section 3. Runtime pieces you need: comm::Comm::AllToAll
// (the counts), comm::GroupStart/GroupEnd with Send/Recv (the rows; sizes differ per peer), Stream::Synchronize.
#include "labs/moe/expert_parallel.h"

#include "reference/base/status.h"

namespace distlab::moe {

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
absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing, const ExpertFn& local_expert,
                                             comm::Comm& comm, comm::Stream& stream, EpStats* stats) {
  return Unimplemented("moe", "C", "ExpertParallelForward");
}

}  // namespace distlab::moe
