// What the two host backends (threads_comm.cc, gloo_comm.cc) share: one record for the arguments of any call,
// the argument checks both apply before a call is launched, the byte counters, and a Comm base class that
// turns each API method into such a record. Internal: code outside reference/comm must not include it.
#ifndef DISTLAB_REFERENCE_COMM_HOST_COMM_H_
#define DISTLAB_REFERENCE_COMM_HOST_COMM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/types.h"

namespace distlab::comm::internal {

// The kinds of call; the values travel between processes in the gloo backend's descriptors.
enum class Kind : int64_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSplit,
  kSend,
  kRecv
};

const char* KindName(Kind kind);  // "AllReduce", ...
inline bool IsCollective(Kind kind) { return kind != Kind::kSend && kind != Kind::kRecv; }

// The arguments of one call of one rank.
struct Args {
  Kind kind = Kind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kF32;
  RedOp op = RedOp::kSum;
  int root = -1;
  int peer = -1;  // Send/Recv
  int color = 0;  // Split
  int key = 0;
};

inline const char* At(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }
inline char* At(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }
// True when [a, a+abytes) and [b, b+bbytes) share a byte.
bool Overlap(const void* a, size_t abytes, const void* b, size_t bbytes);

// The checks one rank can make alone, before anything is launched: dtype and op valid, root and peer in
// range, no Send/Recv to itself outside a group, buffers present where this rank reads or writes, and send
// and recv either exactly in place (as NCCL defines it) or disjoint. INVALID_ARGUMENT starting with `where`.
absl::Status ValidateArgs(const Args& a, int rank, int nranks, const std::string& where);

// The sequence numbers of one rank's calls: the k-th collective of every rank meets the k-th of the others,
// the k-th Send from a to b meets the k-th Recv on b from a.
struct SeqCounters {
  explicit SeqCounters(int nranks) : next_send(nranks, 0), next_recv(nranks, 0) {}
  // The number of call `a` (Send/Recv: per peer; anything else: the collective count), counted.
  uint64_t Take(const Args& a) {
    if (a.kind == Kind::kSend) return next_send[a.peer]++;
    if (a.kind == Kind::kRecv) return next_recv[a.peer]++;
    return next_coll++;
  }
  uint64_t next_coll = 0;
  std::vector<uint64_t> next_send;  // per destination
  std::vector<uint64_t> next_recv;  // per source
};

// "AllReduce(count=1024, f32, sum)", "Send(count=8, bf16, peer=3)", "Split(color=1, key=0)": one rank's call
// as the mismatch messages name it.
std::string Describe(const Args& a);
// Do two ranks' k-th collectives agree? The same kind, and where they apply the same count, dtype, op and
// root (Split: the same kind is enough; the colors and keys are meant to differ).
bool SameCall(const Args& a, const Args& b);
// OK when every rank's k-th collective agrees with rank 0's (calls[p] is rank p's, seq is k - 1); otherwise
// INVALID_ARGUMENT "collective #k mismatch on comm 'name': rank 0 called ..., rank 1 called ...".
absl::Status CheckSameCollective(uint64_t seq, const std::string& comm_name, const std::vector<Args>& calls);
// OK when the k-th Send from `src` to `dst` and the matching Recv agree in count and dtype; otherwise
// INVALID_ARGUMENT "Send/Recv #k on comm 'name': rank src sent N f32 to rank dst, which expected M f32:
// counts must match in Send/Recv".
absl::Status CheckSameP2P(uint64_t seq, const std::string& comm_name, int src, int dst, const Args& send,
                          const Args& recv);

// "none", "rank 2", "ranks 0, 3": for messages naming who arrived or is missing.
std::string RankList(const std::vector<int>& ranks);

// Adds one launched call to a rank's counters (Send, Recv or built-in collective), S as comm.h counts
// it: the whole array for AllGather, ReduceScatter and AllToAll.
void CountCall(const Args& a, int nranks, Stats& stats);

// Trace events of a host backend's calls (reference/trace; nothing happens while recording is off). Each call
// gives two complete events named after its kind ("AllReduce", "Send", ...):
//   category "comm"         on the calling thread, the launch: from the moment the call (or, grouped, its
//                           GroupEnd) starts launching until the call is launched or failed;
//   category "comm.stream"  on the stream's thread, the work: from the moment the stream starts it until it
//                           completes or fails.
// Arguments: op, dtype, count, bytes (S as CountCall counts it), redop / root / peer where they apply, seq
// (the call's number as the messages print it: collective #k, or the k-th Send/Recv between the two ranks),
// comm, rank, nranks, grouped, status ("OK" or the error). pid is the rank in the communicator the process or
// thread was created for (a Split keeps its parent's), so each rank is one process row in the viewer.
struct TraceWho {
  int rank = 0, nranks = 1, pid = 0;
  const std::string* comm = nullptr;
};
void TraceCall(const char* category, const Args& a, const TraceWho& who, uint64_t seq, int64_t start_ns,
               const absl::Status& status, bool grouped);
// Names the calling thread "rank <pid> stream" in the trace, once.
void NameStreamThread(int pid);

// A Comm whose eight data-moving methods all become one Call(Args): the backend implements Call once.
class HostComm : public Comm {
 public:
  absl::Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                         Stream& stream) override;
  absl::Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                         Stream& stream) override;
  absl::Status Reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                      Stream& stream) override;
  absl::Status AllGather(const void* send, void* recv, size_t count, DataType dtype, Stream& stream) override;
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                             Stream& stream) override;
  absl::Status AllToAll(const void* send, void* recv, size_t count, DataType dtype, Stream& stream) override;
  absl::Status Send(const void* buf, size_t count, DataType dtype, int peer, Stream& stream) override;
  absl::Status Recv(void* buf, size_t count, DataType dtype, int peer, Stream& stream) override;

 protected:
  virtual absl::Status Call(const Args& a, Stream& stream) = 0;
};

}  // namespace distlab::comm::internal

#endif  // DISTLAB_REFERENCE_COMM_HOST_COMM_H_
