// The course's communication runtime: one C++ API shaped like NCCL, on CPU ranks.
//
// Vocabulary: n = ranks of a communicator, S = bytes of the (whole) array a collective works on, count =
// elements as NCCL defines them (AllGather and ReduceScatter take the per-rank count).
//
// Semantics students can observe (docs/design.md §3.2-§3.4), on the default `threads` backend (ranks are
// threads):
//  * A collective call returns once every rank of the communicator has launched it (NCCL may block the same
//    way); the data moves asynchronously on the caller's Stream. Stream::Synchronize waits for it; Events
//    time it. Buffers must stay valid and unmodified until the work completes.
//  * Send completes only when the matching Recv runs: no eager buffering. Outside a group, Send and Recv
//    block in the call until the peer has launched the matching operation, so two ranks that both Send
//    first deadlock (reproducibly) -- the watchdog then fails both with a message naming the ranks. Between
//    GroupStart() and GroupEnd() (per calling thread) nothing blocks; GroupEnd launches the grouped
//    operations together, and sends and receives of one group progress together. One thread that drives
//    several ranks must group their calls, as with NCCL.
//  * Argument errors (null buffers, bad rank/root/dtype, aliasing rules) are returned by the call. Errors
//    while running surface at Stream::Synchronize and Comm::GetAsyncError.
//  * Destroy waits for the communicator's pending work; Abort cancels it, and every peer blocked in an
//    operation of the same communicator ends it with an ABORTED status naming the rank that aborted. Any
//    call on a destroyed or aborted communicator returns FAILED_PRECONDITION, never crashes. Both are this
//    runtime's, not NCCL's: ncclCommAbort stops and frees only the local rank's communicator (the peers are
//    not told; every rank must abort its own), and a handle used after ncclCommDestroy or ncclCommAbort
//    is freed memory. The nccl backend aborts locally, as NCCL does.
//  * Beyond NCCL, for learners: the k-th collective of every rank must agree (op, count, dtype, redop, root)
//    and matching Send/Recv must agree (count, dtype); a mismatch is an INVALID_ARGUMENT naming each rank's
//    call. A watchdog fails any wait longer than the communicator's timeout with DEADLINE_EXCEEDED naming
//    the ranks that arrived and those that did not. Per-rank byte counters and a count of built-in collective
//    calls (Stats) let tests check that a ring was built from Send/Recv alone.
//  * The threads backend's built-in collectives are direct shared-memory algorithms: for an all-reduce the
//    ranks' stream threads take chunks from one shared counter, and whoever takes a chunk reduces it
//    straight from every rank's input and writes the result into every rank's output.
//
// The gloo backend (gloo_comm.cc; one rank per process, Gloo over TCP, CommInitFromEnv below) keeps these
// semantics, every dtype and op, Split and Stats, with these differences:
//  * a call returns once its work is queued on the stream, without waiting for the peers (as NCCL usually
//    does); mismatched calls and Send/Recv are still INVALID_ARGUMENT naming each rank's call, reported at
//    Stream::Synchronize (the ranks compare a descriptor before any data moves);
//  * a rank whose process dies is noticed at once by every peer: blocked work fails with UNAVAILABLE naming
//    it; Abort gives ABORTED naming the rank at once as well; a peer that hangs alive is caught by the
//    timeout (DEADLINE_EXCEEDED, which cannot name the missing ranks: each rank sees only its neighbours).
#ifndef DISTLAB_REFERENCE_COMM_COMM_H_
#define DISTLAB_REFERENCE_COMM_COMM_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/types.h"

namespace distlab::comm {

// ---------------------------------------------------------------------------------------------------------
// Streams and events
// ---------------------------------------------------------------------------------------------------------

// An in-order queue of work for one rank (a CUDA stream on the nccl backend; a worker thread here).
class Stream {
 public:
  Stream();
  ~Stream();  // waits for queued work
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Waits until everything enqueued so far has run. Returns the first error any of that work reported since
  // the last Synchronize (then clears it), e.g. a watchdog timeout or an abort.
  absl::Status Synchronize();

  // Enqueues host work (like cudaLaunchHostFunc). A non-OK return is reported by Synchronize.
  void Enqueue(std::function<absl::Status()> work);

  // True when all enqueued work has run.
  bool Idle() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// A marker in a stream: records the time the stream reached it.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Enqueues the marker on `stream` (re-recording replaces an earlier record).
  void Record(Stream& stream);
  // Waits until the stream has reached the marker. Error if never recorded.
  absl::Status Synchronize();
  // True when the marker has been reached.
  bool Query() const;
  // Milliseconds between two reached events (end - start). Error if either was not recorded or reached.
  static absl::StatusOr<double> ElapsedMs(const Event& start, const Event& end);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// ---------------------------------------------------------------------------------------------------------
// Communicators
// ---------------------------------------------------------------------------------------------------------

enum class Backend { kThreads, kGloo, kNccl };

// "threads", "gloo", "nccl": the names DISTLAB_BACKEND and the command-line flags use.
std::string_view Name(Backend backend);
// Inverse of Name(); an error names the accepted spellings.
absl::StatusOr<Backend> ParseBackend(std::string_view name);
// The backend DISTLAB_BACKEND names, for programs whose ranks are processes: gloo when it is unset or empty
// (threads makes sense for one process only; nccl needs one GPU per rank). This is the one place the
// variable is read.
absl::StatusOr<Backend> BackendFromEnv();

// OK when `backend` can make a communicator of `ranks` ranks in this process; otherwise why not:
// UNIMPLEMENTED when it is not built in, FAILED_PRECONDITION naming the GPUs needed and found (nccl: one
// rank per GPU) or the library that could not be loaded.
absl::Status BackendAvailable(Backend backend, int ranks);

// The backend and host staging a default-constructed CommOptions starts with: kThreads and false, unless a
// test harness changed them (reference/comm/testing.h).
Backend DefaultBackend();
bool DefaultHostStaging();

struct CommOptions {
  Backend backend = DefaultBackend();
  // The watchdog: a wait longer than this fails with DEADLINE_EXCEEDED naming the missing ranks. Multiplied
  // by DISTLAB_TIMEOUT_SCALE (sanitizer configs set it).
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  // A name that appears in error messages ("comm 'tp0'").
  std::string name;
  // nccl only. NCCL moves device memory only, and by default the nccl backend rejects host buffers
  // (INVALID_ARGUMENT naming the buffer). With host_staging, a host buffer is staged through device memory
  // instead: the input is copied to a block allocated on the rank's CUDA stream (cudaMallocAsync) when the
  // call is made, NCCL works on the block, and the output is copied back to the host by the stream after the
  // operation (so, as always, read it after Stream::Synchronize). Correct, not fast: two copies over PCIe per
  // call. It lets code that keeps its tensors in host memory (Labs 4-6) run its communication on real GPUs.
  // Device buffers are never staged.
  bool host_staging = DefaultHostStaging();
};

// Counters of one rank's communicator. Bytes count payload only (count * SizeOf(dtype)).
struct Stats {
  uint64_t bytes_sent = 0;        // by Send
  uint64_t bytes_received = 0;    // by Recv
  uint64_t sends = 0;             // Send calls
  uint64_t recvs = 0;             // Recv calls
  uint64_t collective_calls = 0;  // built-in collective calls (AllReduce, Broadcast, ...)
  uint64_t collective_bytes = 0;  // S of each built-in collective, summed
  // The same calls and bytes by collective kind (they sum to collective_calls and collective_bytes), so that
  // a test can tell an all-reduce of S from a reduce-scatter of S.
  struct Kind {
    uint64_t calls = 0;
    uint64_t bytes = 0;  // S, as collective_bytes counts it
  };
  Kind all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all;
};

// An opaque token that lets ranks created independently find each other (ncclUniqueId).
struct UniqueId {
  uint64_t value = 0;
};

class Comm {
 public:
  virtual ~Comm();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  virtual const CommOptions& options() const = 0;

  // --- Collectives (NCCL argument order and counts) ---

  // recv[i] = op over ranks of send[i], i < count. In place when send == recv.
  virtual absl::Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                 Stream& stream) = 0;
  // recv = root's send on every rank (`send` is read on the root only). In place when send == recv.
  virtual absl::Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                 Stream& stream) = 0;
  // recv (on root only) = op over ranks of send.
  virtual absl::Status Reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                              Stream& stream) = 0;
  // recv[r*count + i] = send_of_rank_r[i]; `count` is per rank; recv holds size()*count elements.
  // In place when send == recv + rank()*count.
  virtual absl::Status AllGather(const void* send, void* recv, size_t count, DataType dtype,
                                 Stream& stream) = 0;
  // recv[i] = op over ranks of send[rank()*count + i]; `count` is per rank; send holds size()*count.
  // In place when recv == send + rank()*count.
  virtual absl::Status ReduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                     Stream& stream) = 0;
  // recv[p*count + i] = send_of_rank_p[rank()*count + i]; both buffers hold size()*count elements.
  virtual absl::Status AllToAll(const void* send, void* recv, size_t count, DataType dtype,
                                Stream& stream) = 0;

  // --- Point to point ---
  // A Send to self (or Recv from self) is allowed only inside a group that also holds its match; outside a
  // group it would wait for itself forever and is rejected with INVALID_ARGUMENT.
  virtual absl::Status Send(const void* buf, size_t count, DataType dtype, int peer, Stream& stream) = 0;
  virtual absl::Status Recv(void* buf, size_t count, DataType dtype, int peer, Stream& stream) = 0;

  // --- Lifecycle ---

  // Waits for this communicator's pending work, then releases it (ncclCommFinalize + ncclCommDestroy).
  // Returns the first error that work reported, if any. Blocks while work is stuck: use Abort to escape.
  virtual absl::Status Destroy() = 0;
  // Cancels pending work at once and releases the communicator; on the threads and gloo backends peers
  // blocked on this communicator's operations fail with ABORTED (NCCL's ncclCommAbort, and so the nccl
  // backend, tells no peer). Safe to call from another thread while this rank is blocked.
  virtual absl::Status Abort() = 0;
  // OK while healthy; otherwise the error that broke the communicator (a timeout, a peer's abort, ...).
  virtual absl::Status GetAsyncError() = 0;
  // True after Destroy or Abort.
  virtual bool released() const = 0;

  // A new communicator of the ranks that pass the same `color`, ordered by (key, old rank)
  // (ncclCommSplit). Every rank of this communicator must call it. color < 0 returns nullptr (no group).
  virtual absl::StatusOr<std::unique_ptr<Comm>> Split(int color, int key) = 0;

  virtual Stats stats() const = 0;
  virtual void ResetStats() = 0;
};

// Creates n communicators of one clique in this process (ncclCommInitAll). Rank r is element r.
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> CommInitAll(int n, CommOptions options = {});

// A fresh id to hand to every rank (ncclGetUniqueId).
UniqueId GetUniqueId();
// Joins the clique `id` as `rank` of `nranks`; blocks until all ranks joined or, on the threads and gloo
// backends, the timeout passes (ncclCommInitRank). That timeout is this runtime's: NCCL's blocking init,
// which the nccl backend calls, waits for a missing rank for ever -- in a real job the deadline comes from
// the rendezvous store, or from a nonblocking communicator that the caller polls and aborts. On the threads
// backend the ranks are threads of this process.
absl::StatusOr<std::unique_ptr<Comm>> CommInitRank(int nranks, UniqueId id, int rank,
                                                   CommOptions options = {});

// --- Ranks as processes (./labctl launch; README "Running on several processes and machines") ---
//
// Builds this process's communicator from the environment a launcher sets (torchrun's conventions):
//   RANK, WORLD_SIZE        this process's rank and the number of ranks (required; RANK < WORLD_SIZE)
//   LOCAL_RANK              rank among the processes of this machine (informational here)
//   MASTER_ADDR, MASTER_PORT  where rank 0 serves the rendezvous TcpStore (store.h); every rank connects
//   DISTLAB_BACKEND         gloo (default) | threads (only with WORLD_SIZE=1) | nccl (BackendFromEnv)
//   DISTLAB_STORE           optional "file:DIR": rendezvous through a FileStore in DIR instead (shared FS)
//   DISTLAB_GLOO_HOST       optional: the address Gloo listens on (default: this machine's address on the
//                           route to MASTER_ADDR, so loopback runs stay on 127.0.0.1)
//   DISTLAB_COMM_TIMEOUT_MS optional: overrides options.timeout (the store, the rendezvous and the watchdog)
// Without RANK/WORLD_SIZE it is FAILED_PRECONDITION saying how to launch (programs that also run as threads
// test LaunchedByLauncher() first and use CommInitAll/RunRanks otherwise). A missing rank, a WORLD_SIZE that
// differs between ranks or an unreachable store is an error within the timeout, never a hang. Each call in a
// process makes a new communicator of all ranks (every rank must make the same number of calls).
absl::StatusOr<std::unique_ptr<Comm>> CommInitFromEnv(CommOptions options = {});
// True when WORLD_SIZE is set: this process was started by a launcher.
bool LaunchedByLauncher();

// Thread-local grouping (ncclGroupStart / ncclGroupEnd). Groups nest; the outermost GroupEnd launches.
// GroupEnd returns the first error of the grouped calls (argument errors, mismatches, timeouts).
absl::Status GroupStart();
absl::Status GroupEnd();

// The grouped exchange, written once: GroupStart, then calls() (its Sends and Recvs, or any other calls),
// then GroupEnd -- always, also when calls() returned an error part-way or threw -- and the first error
// (calls()'s, else GroupEnd's). For a variable set of peers:
//   RETURN_IF_ERROR(comm::Grouped([&]() -> absl::Status {
//     for (int p : peers) { RETURN_IF_ERROR(c.Send(...)); RETURN_IF_ERROR(c.Recv(...)); }
//     return absl::OkStatus();
//   }));
absl::Status Grouped(const std::function<absl::Status()>& calls);

// One step of a ring or a butterfly (MPI_Sendrecv): sends send_count elements of `send` to `to` and receives
// recv_count into `recv` from `from`, in one group, so neither call waits for the other. An empty message is
// skipped: both sides must agree that it is empty, as they agree on every count.
absl::Status SendRecv(Comm& comm, const void* send, size_t send_count, int to, void* recv, size_t recv_count,
                      int from, DataType dtype, Stream& stream);

// Runs body(rank, comm, stream) on n threads, one per rank, each with its own communicator and stream;
// synchronizes each stream after body and destroys each communicator. Returns one status per rank. A rank
// whose body fails aborts its communicator, so peers blocked in a call with it fail at once (kAborted).
// The helper most tests use; Lab 1 asks students to write the robust version (RunWithWatchdog).
std::vector<absl::Status> RunRanks(
    int n, const std::function<absl::Status(int rank, Comm& comm, Stream& stream)>& body,
    CommOptions options = {});
// The first non-OK status of RunRanks that is not a peer's abort (the cause), else the first non-OK, or OK.
absl::Status FirstError(const std::vector<absl::Status>& statuses);

// The communicator timeout with DISTLAB_TIMEOUT_SCALE applied.
std::chrono::milliseconds ScaledTimeout(std::chrono::milliseconds base);

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_COMM_H_
