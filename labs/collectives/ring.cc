// Lab 1 (collectives), stage B: ring collectives from Send/Recv and groups only. Your code goes here.
//
// Read first: ring.h (the contracts), the Send/Recv and group paragraphs of reference/comm/comm.h, and
// notes/01-collectives.md sections 3 and 4. Public tests: ring_test.cc.
//
// The tools (comm.h): Comm::Send and Comm::Recv, comm::GroupStart and comm::GroupEnd, Stream::Enqueue (host
// work that runs on the stream after everything queued before it), comm::ReduceInto and comm::FinishReduce
// (every dtype and op), comm::SizeOf. Never call a built-in collective here, and build each exchange from
// these calls yourself: comm::SendRecv, the runtime's finished version, is for the later stages and labs.
#include "labs/collectives/ring.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage B): RingReduceScatter -- contract: ring.h (RingReduceScatter); idea:
//   notes/01-collectives.md §4.
//   In place, recv is chunk r of send. The call returns before the data moves, so a temporary buffer must
//   outlive the stream work that uses it (a shared_ptr captured by that work, for example).
//   Follow one chunk around the ring: at which rank must it start so that it ends, complete, on its owner?
absl::Status RingReduceScatter(const void* send, void* recv, size_t count, comm::DataType dtype,
                               comm::RedOp op, comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingReduceScatter");
}

// TODO(collectives stage B): RingAllGather -- contract: ring.h (RingAllGather); idea:
//   notes/01-collectives.md §4.
//   In place, send is block r of recv. A received block can land straight in recv: no staging needed.
//   After step s, which blocks does rank r hold, and which one should it pass on next?
absl::Status RingAllGather(const void* send, void* recv, size_t count, comm::DataType dtype, comm::Comm& comm,
                           comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingAllGather");
}

// TODO(collectives stage B): RingAllReduce -- contract: ring.h (RingAllReduce); idea:
//   notes/01-collectives.md §4 ("Bytes").
//   Any count, so chunks are not all equal and some are empty when count < n: both ends of a ring step
//   must agree on every message's size (the runtime names a mismatch). In place when send == recv.
//   Count 6 on 8 ranks: which chunk boundaries keep every rank within one element of 2(n-1)/n * S?
absl::Status RingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype, comm::RedOp op,
                           comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingAllReduce");
}

// TODO(collectives stage B): RingBroadcast -- contract: ring.h (RingBroadcast); idea:
//   notes/01-collectives.md §4 (broadcast).
//   `send` is read on the root only, and the root's recv must hold the data too. A chain has no cycle, so
//   plain Send and Recv (no group) are enough here; the order of the calls is part of the contract.
//   Follow the last segment down the chain: how long after the first does it reach the last rank?
absl::Status RingBroadcast(const void* send, void* recv, size_t count, comm::DataType dtype, int root,
                           comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingBroadcast");
}

// TODO(collectives stage B): RingAllToAll -- contract: ring.h (RingAllToAll); idea:
//   notes/01-collectives.md §4 (all-to-all).
//   Your own block is a local copy (Stream::Enqueue); every other block is one grouped exchange.
//   Which two peers does rank r meet at each step, so that every ordered pair meets exactly once?
absl::Status RingAllToAll(const void* send, void* recv, size_t count, comm::DataType dtype, comm::Comm& comm,
                          comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingAllToAll");
}

}  // namespace distlab::collectives
