// Lab 1 (collectives), stage D (stretch): the recursive halving-doubling all-reduce, from Send/Recv and
// groups only, under the rules of ring.h (no built-in collective; results equal the built-ins).
//
// Vocabulary: n = ranks (a power of two), r = this rank, d = the distance to this step's partner r XOR d.
#ifndef DISTLAB_LABS_COLLECTIVES_HALVING_DOUBLING_H_
#define DISTLAB_LABS_COLLECTIVES_HALVING_DOUBLING_H_

#include <cstddef>

#include "absl/status/status.h"
#include "reference/comm/comm.h"

namespace distlab::collectives {

// Recursive halving (reduce-scatter) then recursive doubling (all-gather), for a power-of-two n; any other
// n is INVALID_ARGUMENT, with a message that names n. Any count; in place when send == recv.
// Cost, checked with the communicator's Stats: for count >= n every rank sends exactly log2 n messages in
// each phase, 2 log2 n in all (a message of zero elements is skipped, so fewer when count < n), against the
// ring's 2(n-1); all ranks together send 2(n-1) S bytes, as the ring, and with count a multiple of n each
// rank sends exactly 2(n-1)/n S.
absl::Status HalvingDoublingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype,
                                      comm::RedOp op, comm::Comm& comm, comm::Stream& stream);

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_HALVING_DOUBLING_H_
