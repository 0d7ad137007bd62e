// Lab 1 (collectives), stage B: collectives built from Send/Recv and groups only (the stretch stage D,
// halving-doubling, is in halving_doubling.h).
//
// Vocabulary: n = ranks, r = this rank, S = bytes of the whole array, count = elements as NCCL defines them
// (ReduceScatter and AllGather take the per-rank count; AllToAll the count per peer block).
//
// Each function has the argument order and buffer rules of the Comm method it mirrors (comm.h): in place
// when the buffers alias the way NCCL says, out of place otherwise. Like the built-ins, a call returns once
// the communication is launched; results are ready after stream.Synchronize(). Temporary buffers must live
// until the stream has run the work that uses them.
//
// Rules the hidden tests check:
//   * no built-in collective is called (comm.stats().collective_calls stays 0);
//   * results equal the built-in collectives: bit-exact for integer dtypes, within a stated tolerance for
//     floating ones (the order of the reduction may differ), for every dtype and every op;
//   * the ring all-reduce sends exactly 2(n-1)/n * S bytes in total per rank on average (all ranks together
//     2(n-1) * S), each rank within one element of that;
//   * RingAllReduce and RingBroadcast take any count (not divisible by n, smaller than n, zero);
//   * RingBroadcast is the pipelined chain described at its declaration, in that order of Send and Recv
//     calls on each rank (the tests record the calls).
#ifndef DISTLAB_LABS_COLLECTIVES_RING_H_
#define DISTLAB_LABS_COLLECTIVES_RING_H_

#include <cstddef>

#include "absl/status/status.h"
#include "reference/comm/comm.h"

namespace distlab::collectives {

// recv[i] = op over ranks of send[r*count + i]; send holds n*count elements. In place when
// recv == send + r*count.
absl::Status RingReduceScatter(const void* send, void* recv, size_t count, comm::DataType dtype,
                               comm::RedOp op, comm::Comm& comm, comm::Stream& stream);

// recv[p*count + i] = send of rank p [i]; recv holds n*count elements. In place when send == recv + r*count.
absl::Status RingAllGather(const void* send, void* recv, size_t count, comm::DataType dtype, comm::Comm& comm,
                           comm::Stream& stream);

// recv[i] = op over ranks of send[i], i < count: a ring reduce-scatter followed by a ring all-gather. Any
// count. In place when send == recv.
absl::Status RingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype, comm::RedOp op,
                           comm::Comm& comm, comm::Stream& stream);

// recv = root's send on every rank, as a pipelined chain root -> root+1 -> ... -> root+n-1 (mod n): the
// data goes in segments (at least two once S reaches 1 MiB; the solution uses 512 KiB), the root only
// Sends to root+1, the last rank only Recvs from its predecessor, and every rank in between, for each
// segment i in order, calls Recv(segment i) from its predecessor and then Send(segment i) to its successor
// BEFORE it calls Recv(segment i + 1) -- so the segments travel the chain at the same time (notes, section
// 4). Any count. `send` is read on the root only. In place when send == recv. A root outside [0, n) is
// INVALID_ARGUMENT.
absl::Status RingBroadcast(const void* send, void* recv, size_t count, comm::DataType dtype, int root,
                           comm::Comm& comm, comm::Stream& stream);

// recv[p*count + i] = send of rank p [r*count + i]; both buffers hold n*count elements and must not
// overlap (INVALID_ARGUMENT when they do).
absl::Status RingAllToAll(const void* send, void* recv, size_t count, comm::DataType dtype, comm::Comm& comm,
                          comm::Stream& stream);

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_RING_H_
