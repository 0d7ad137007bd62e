// Lab 1 (collectives), stage D (stretch): recursive halving-doubling all-reduce. Your code goes here.
// Read first: halving_doubling.h, the rules of ring.h it shares, and notes/01-collectives.md §7.
// Public tests: halving_doubling_test.cc.
#include "labs/collectives/halving_doubling.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage D): HalvingDoublingAllReduce -- contract: halving_doubling.h; idea:
//   notes/01-collectives.md §7 (recursive halving-doubling).
//   Tools: comm::SendRecv (one grouped exchange with one peer; a side of zero elements is skipped) and, as in
//   stage B, Stream::Enqueue with comm::ReduceInto and comm::FinishReduce; temporaries outlive their work.
//   Once rank r owns its n-th, which rank holds the piece that completes the range r held one step before?
absl::Status HalvingDoublingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype,
                                      comm::RedOp op, comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "D", "HalvingDoublingAllReduce");
}

}  // namespace distlab::collectives
