// Lab 1 (collectives), stage B: ring collectives from Send/Recv and groups only. Your code goes here.
//
// Read first: ring.h (contracts), the Send/Recv and group paragraphs of reference/comm/comm.h, and the
// ring figures in notes/01-collectives.md. Public tests: ring_test.cc.
//
// Tools you will want: comm::GroupStart/GroupEnd (a ring step sends and receives at once), Stream::Enqueue
// (run the reduction after the receive, in stream order), comm::ReduceInto and comm::FinishReduce (every
// dtype and op; avg divides once at the end), comm::SizeOf. Never call a built-in collective here.
//
// Grouping is this stage's lesson, so write the step yourself: GroupStart, Send, Recv, then GroupEnd even
// when a call failed (a group left open swallows every later call of this thread), and return the first
// error. (Later labs call comm::SendRecv, the runtime's version of exactly this step.)
#include "labs/collectives/ring.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage B): RingReduceScatter.
//   1. count == 0: nothing to do. n == 1: the output is the input (avg: divide by 1).
//   2. Chunk j of the whole send array (n*count elements) is rank j's output.
//   3. Step s = 0..n-2: send chunk (r-s-1) to r+1 and receive chunk (r-s-2) from r-1 in ONE group; then
//      reduce this rank's own contribution to that chunk into what was received.
//      Step 0 sends your own data; later steps forward the partial result of the step before.
//   4. After n-1 steps you hold chunk r reduced over all ranks: finish avg, write it to recv.
//   Edge cases: in place (recv == send + r*count) -- write recv only after the last read of your chunk;
//   temporary buffers must outlive the work enqueued on the stream.
absl::Status RingReduceScatter(const void* send, void* recv, size_t count, comm::DataType dtype,
                               comm::RedOp op, comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingReduceScatter");
}

// TODO(collectives stage B): RingAllGather.
//   1. Put your block at recv + r*count (already there in place).
//   2. Step s = 0..n-2: send block (r-s) to r+1, receive block (r-s-1) from r-1 straight into recv.
absl::Status RingAllGather(const void* send, void* recv, size_t count, comm::DataType dtype, comm::Comm& comm,
                           comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingAllGather");
}

// TODO(collectives stage B): RingAllReduce = reduce-scatter + all-gather on the same chunks.
//   1. Any count: cut count elements into n chunks, chunk j = [j*count/n, (j+1)*count/n) (integer
//      division): sizes differ by at most one and the larger ones are spread out. Some chunks are empty
//      when count < n -- skip empty messages on both sides consistently.
//   2. Bytes: every rank sends (n-1) chunks per phase; the tests check 2(n-1) * S over all ranks and each
//      rank within one element of 2(n-1)/n * S (why does "the first count % n chunks get one more" fail
//      that for some counts?).
//   3. In place (send == recv) and out of place.
absl::Status RingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype, comm::RedOp op,
                           comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingAllReduce");
}

// TODO(collectives stage B): RingBroadcast.
//   1. Validate root. count == 0: nothing to do.
//   2. A chain root -> root+1 -> ... -> root-1: each rank receives from its predecessor and forwards to its
//      successor (the last one only receives). Cut the data into segments so the chain pipelines.
//   3. The root's recv must hold the data too (copy when out of place).
absl::Status RingBroadcast(const void* send, void* recv, size_t count, comm::DataType dtype, int root,
                           comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingBroadcast");
}

// TODO(collectives stage B): RingAllToAll.
//   1. Your own block: recv[r] = send[r] (a local copy).
//   2. Step s = 1..n-1: send block (r+s) to rank r+s and receive block from rank r-s into recv[r-s], grouped.
//   3. Overlapping buffers are INVALID_ARGUMENT.
absl::Status RingAllToAll(const void* send, void* recv, size_t count, comm::DataType dtype, comm::Comm& comm,
                          comm::Stream& stream) {
  return Unimplemented("collectives", "B", "RingAllToAll");
}

}  // namespace distlab::collectives
