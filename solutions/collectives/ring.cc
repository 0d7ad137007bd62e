// Lab 1 (collectives), stage B -- solution: ring collectives from Send/Recv and groups.
//
// Vocabulary: n = ranks, r = this rank, next = r+1 and prev = r-1 (mod n), S = bytes of the whole array.
//
// The array is cut into n chunks (sizes differ by at most one element when n does not divide count; some
// are empty when count < n). In a ring step every rank sends one chunk to next and receives one from prev
// at the same time -- which is why each step is a GROUP: outside a group Send blocks until the peer posts
// its Recv, so "everyone sends first" deadlocks.
//
//   reduce-scatter, step s = 0..n-2:  send chunk (r-s-1), receive chunk (r-s-2) and reduce own data into it
//                                     -> after n-1 steps rank r holds chunk r fully reduced.
//   all-gather,     step s = 0..n-2:  send chunk (r-s), receive chunk (r-s-1) into place
//                                     -> after n-1 steps every rank holds every chunk.
// Each rank sends (n-1) chunks per phase, so an all-reduce (RS + AG) sends 2(n-1)/n * S per rank.
//
// Everything after a receive runs on the rank's stream (Stream::Enqueue), in order behind the receive:
// the calls return once the communication is launched, as the built-ins do.
#include "labs/collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "reference/base/status.h"

namespace distlab::collectives {
namespace {

using comm::Comm;
using comm::DataType;
using comm::RedOp;
using comm::Stream;

int Mod(int a, int n) { return ((a % n) + n) % n; }

// n chunks of a count-element array: chunk j is [j*count/n, (j+1)*count/n) in integer division. Sizes
// differ by at most one element, and the extra elements are spread evenly, so any two neighbouring chunks
// together are within one element of 2*count/n -- which keeps every rank's bytes sent within one element
// of 2(n-1)/n * S (a rank sends all chunks but two neighbours: r in reduce-scatter, r+1 in all-gather).
struct Chunks {
  size_t count;
  int n;
  size_t offset(int j) const { return j * count / n; }
  size_t size(int j) const { return offset(j + 1) - offset(j); }
};

using Buffer = std::shared_ptr<std::vector<char>>;

// Keeps `b` alive until the stream has run everything enqueued so far.
void KeepAlive(Stream& stream, Buffer b) {
  stream.Enqueue([b] { return absl::OkStatus(); });
}

void EnqueueCopy(Stream& stream, void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  stream.Enqueue([dst, src, bytes] {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  });
}

void EnqueueReduce(Stream& stream, void* acc, const void* in, size_t count, DataType dtype, RedOp op) {
  if (count == 0) return;
  stream.Enqueue([=] {
    comm::ReduceInto(acc, in, count, dtype, op);
    return absl::OkStatus();
  });
}

void EnqueueFinish(Stream& stream, void* acc, size_t count, DataType dtype, RedOp op, int n) {
  if (op != RedOp::kAvg || count == 0) return;
  stream.Enqueue([=] {
    comm::FinishReduce(acc, count, dtype, op, n);
    return absl::OkStatus();
  });
}

// One step: send `scount` elements to `to` and receive `rcount` from `from`, grouped so that neither call
// waits for the other. Empty messages are skipped (both sides know the chunk sizes).
absl::Status Exchange(Comm& comm, Stream& stream, const void* sbuf, size_t scount, int to, void* rbuf,
                      size_t rcount, int from, DataType dtype) {
  RETURN_IF_ERROR(comm::GroupStart());
  absl::Status s;
  if (scount > 0) s = comm.Send(sbuf, scount, dtype, to, stream);
  if (s.ok() && rcount > 0) s = comm.Recv(rbuf, rcount, dtype, from, stream);
  absl::Status end = comm::GroupEnd();  // always close the group, even after an error
  return s.ok() ? end : s;
}

absl::Status CheckBuffers(const char* fn, const void* send, const void* recv, size_t count) {
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return absl::InvalidArgumentError(std::string(fn) + ": null buffer with count " + std::to_string(count));
  }
  return absl::OkStatus();
}

// Ring reduce-scatter over `chunks` of `in`; the reduced chunk r is written to `out`. `in` is only read
// (except that `out` may alias chunk r of it: the last write happens after the last read).
absl::Status ReduceScatterChunks(const char* in, char* out, const Chunks& chunks, DataType dtype, RedOp op,
                                 Comm& comm, Stream& stream) {
  const int n = comm.size(), r = comm.rank();
  const size_t elem = comm::SizeOf(dtype);
  if (n == 1) {
    EnqueueCopy(stream, out, in, chunks.size(0) * elem);
    EnqueueFinish(stream, out, chunks.size(0), dtype, op, 1);
    return absl::OkStatus();
  }
  // Two staging buffers: one holds the partial sum being sent, the other receives the next one.
  const size_t largest = (chunks.count + n - 1) / n;  // chunk 0 may be the empty one when count < n
  Buffer a = std::make_shared<std::vector<char>>(largest * elem);
  Buffer b = std::make_shared<std::vector<char>>(largest * elem);
  char* cur = a->data();
  char* nxt = b->data();
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = Mod(r - s - 1, n), recv_idx = Mod(r - s - 2, n);
    // Step 0 sends this rank's own data; later steps forward the partial sum received and reduced before.
    const char* sbuf = s == 0 ? in + chunks.offset(send_idx) * elem : cur;
    RETURN_IF_ERROR(
        Exchange(comm, stream, sbuf, chunks.size(send_idx), next, nxt, chunks.size(recv_idx), prev, dtype));
    EnqueueReduce(stream, nxt, in + chunks.offset(recv_idx) * elem, chunks.size(recv_idx), dtype, op);
    std::swap(cur, nxt);
  }
  // After step n-2 the chunk just reduced is chunk Mod(r - n, n) == r.
  EnqueueFinish(stream, cur, chunks.size(r), dtype, op, n);
  EnqueueCopy(stream, out, cur, chunks.size(r) * elem);
  KeepAlive(stream, a);
  KeepAlive(stream, b);
  return absl::OkStatus();
}

// Ring all-gather in place: chunk r of `buf` is this rank's; afterwards every chunk is filled.
absl::Status AllGatherChunks(char* buf, const Chunks& chunks, DataType dtype, Comm& comm, Stream& stream) {
  const int n = comm.size(), r = comm.rank();
  const size_t elem = comm::SizeOf(dtype);
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = Mod(r - s, n), recv_idx = Mod(r - s - 1, n);
    RETURN_IF_ERROR(Exchange(comm, stream, buf + chunks.offset(send_idx) * elem, chunks.size(send_idx), next,
                             buf + chunks.offset(recv_idx) * elem, chunks.size(recv_idx), prev, dtype));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RingReduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                               Comm& comm, Stream& stream) {
  RETURN_IF_ERROR(CheckBuffers("RingReduceScatter", send, recv, count));
  if (count == 0) return absl::OkStatus();
  const Chunks chunks{count * comm.size(), comm.size()};  // equal chunks of `count`
  return ReduceScatterChunks(static_cast<const char*>(send), static_cast<char*>(recv), chunks, dtype, op,
                             comm, stream);
}

absl::Status RingAllGather(const void* send, void* recv, size_t count, DataType dtype, Comm& comm,
                           Stream& stream) {
  RETURN_IF_ERROR(CheckBuffers("RingAllGather", send, recv, count));
  if (count == 0) return absl::OkStatus();
  const size_t elem = comm::SizeOf(dtype);
  char* out = static_cast<char*>(recv);
  // Out of place: put this rank's block where it belongs first (in place it is already there).
  EnqueueCopy(stream, out + comm.rank() * count * elem, send, count * elem);
  return AllGatherChunks(out, Chunks{count * comm.size(), comm.size()}, dtype, comm, stream);
}

absl::Status RingAllReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, Comm& comm,
                           Stream& stream) {
  RETURN_IF_ERROR(CheckBuffers("RingAllReduce", send, recv, count));
  if (count == 0) return absl::OkStatus();
  const Chunks chunks{count, comm.size()};
  char* out = static_cast<char*>(recv);
  const size_t elem = comm::SizeOf(dtype);
  // Reduce-scatter reads `send` and leaves the reduced chunk r in `recv`; all-gather then fills the rest
  // of `recv` in place. Out of place needs no extra copy.
  RETURN_IF_ERROR(ReduceScatterChunks(static_cast<const char*>(send), out + chunks.offset(comm.rank()) * elem,
                                      chunks, dtype, op, comm, stream));
  return AllGatherChunks(out, chunks, dtype, comm, stream);
}

absl::Status RingBroadcast(const void* send, void* recv, size_t count, DataType dtype, int root, Comm& comm,
                           Stream& stream) {
  const int n = comm.size(), r = comm.rank();
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError("RingBroadcast: root " + std::to_string(root) + " is not a rank of " +
                                      std::to_string(n));
  }
  if (count > 0 && recv == nullptr) return absl::InvalidArgumentError("RingBroadcast: null recv buffer");
  if (count > 0 && r == root && send == nullptr) {
    return absl::InvalidArgumentError("RingBroadcast: null send buffer on the root");
  }
  if (count == 0) return absl::OkStatus();
  const size_t elem = comm::SizeOf(dtype);
  // A chain root -> root+1 -> ... -> root+n-1, cut into k segments so that rank j forwards segment i while
  // rank j-1 already sends segment i+1. With a message costing alpha + m beta the time is about
  // (n - 2 + k) (alpha + (S/k) beta) instead of (n - 1) (alpha + S beta) for the whole array: for large S,
  // about S beta instead of (n - 1) S beta. Each rank issues Send(segment i) before Recv(segment i + 1).
  constexpr size_t kSegmentBytes = 512 << 10;
  const size_t seg = std::max<size_t>(1, kSegmentBytes / elem);
  const int pos = Mod(r - root, n);  // position in the chain; the root is 0
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  if (r == root) {
    EnqueueCopy(stream, recv, send, count * elem);
    if (n == 1) return absl::OkStatus();
    for (size_t off = 0; off < count; off += seg) {
      RETURN_IF_ERROR(comm.Send(static_cast<const char*>(send) + off * elem, std::min(seg, count - off),
                                dtype, next, stream));
    }
    return absl::OkStatus();
  }
  // A chain has no cycle, so plain (ungrouped) Recv-then-Send cannot deadlock: the last rank only receives.
  char* out = static_cast<char*>(recv);
  for (size_t off = 0; off < count; off += seg) {
    const size_t len = std::min(seg, count - off);
    RETURN_IF_ERROR(comm.Recv(out + off * elem, len, dtype, prev, stream));
    if (pos < n - 1) RETURN_IF_ERROR(comm.Send(out + off * elem, len, dtype, next, stream));
  }
  return absl::OkStatus();
}

absl::Status RingAllToAll(const void* send, void* recv, size_t count, DataType dtype, Comm& comm,
                          Stream& stream) {
  RETURN_IF_ERROR(CheckBuffers("RingAllToAll", send, recv, count));
  if (count == 0) return absl::OkStatus();
  const int n = comm.size(), r = comm.rank();
  const size_t elem = comm::SizeOf(dtype), bytes = n * count * elem;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (in < out + bytes && out < in + bytes) {
    return absl::InvalidArgumentError("RingAllToAll: send and recv overlap; all-to-all is out of place only");
  }
  EnqueueCopy(stream, out + r * count * elem, in + r * count * elem, count * elem);
  // Step s pairs this rank with r+s (to) and r-s (from): every pair exchanges exactly once.
  for (int s = 1; s < n; ++s) {
    const int to = Mod(r + s, n), from = Mod(r - s, n);
    RETURN_IF_ERROR(Exchange(comm, stream, in + to * count * elem, count, to, out + from * count * elem,
                             count, from, dtype));
  }
  return absl::OkStatus();
}

}  // namespace distlab::collectives
