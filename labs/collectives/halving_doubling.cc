// Lab 1 (collectives), stage D (stretch): recursive halving-doubling all-reduce. Your code goes here.
// Public test: halving_doubling_test.cc.
#include "labs/collectives/halving_doubling.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage D): HalvingDoublingAllReduce.
//   1. n not a power of two: INVALID_ARGUMENT naming n. count == 0: nothing to do.
//   2. Halving, d = n/2, n/4, ..., 1: with partner r XOR d, split your current range in two; keep one half
//      (the lower one when bit d of r is 0), send the other, receive the partner's copy of the half you
//      keep and reduce it in. Remember each range and which half you kept.
//   3. Finish avg on the n-th you own.
//   4. Doubling, d = 1, 2, ..., n/2: exchange owned ranges with r XOR d, undoing the halving in reverse.
//   Edge cases: count < n (empty halves: send nothing), in place and out of place.
absl::Status HalvingDoublingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype,
                                      comm::RedOp op, comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "D", "HalvingDoublingAllReduce");
}

}  // namespace distlab::collectives
