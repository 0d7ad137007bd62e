// The threads backend: every rank is a thread of this process, and data moves by direct shared-memory copies.
//
// Shared state. The ranks of one communicator share a Clique: one mutex and one condition variable guard
// every piece of shared bookkeeping (rendezvous slots, per-rank counters, the first fatal error). Data never
// moves under the mutex: a copy or reduction runs between two rendezvous ("barrier A: every stream reached
// the op", "barrier B: every rank finished touching the buffers"), and `active` counts the copies in flight
// so that Abort and error paths can wait until nobody touches user buffers any more.
//
// Collectives. A call takes the rank's next sequence number k and registers its arguments in the slot of k;
// it returns once all n ranks registered (the launch rendezvous), after comparing their arguments. The work
// then runs on the caller's stream: barrier A, the rank's share of the direct algorithm, barrier B.
//
// Send/Recv. The k-th Send from a to b meets the k-th Recv on b from a in the slot (a, b, k). The sender's
// stream marks the slot "ready" (its buffer holds the data), the receiver's stream copies straight from the
// sender's buffer, then marks it "copied", which completes the sender's op. The grouped ops of one stream run
// as one unit: first every send is marked ready, then collectives run, then receives copy, and only then do
// sends wait for their copies -- so a ring step Send(next)+Recv(prev) in one group cannot deadlock.
//
// Choices where NCCL leaves room: a Send to self (or Recv from self) is allowed only inside a group that also
// holds its match (outside one it would wait for itself forever, so it is rejected with INVALID_ARGUMENT);
// Split cannot be grouped; an argument error does not consume a sequence number (peers then time out).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/host_comm.h"
#include "reference/comm/internal.h"
#include "reference/comm/streaming_store.h"
#include "reference/comm/types.h"
#include "reference/trace/trace.h"

namespace distlab::comm::threads {
namespace {

using Clock = std::chrono::steady_clock;
using internal::Args;
using internal::At;
using internal::Fresh;
using internal::IsCollective;
using internal::Kind;
using internal::KindName;
using internal::kStreamingStores;
using internal::RankList;
using internal::StoreFence;
using internal::Stream64;

// Reductions are shared out in chunks of this many bytes: each rank thread takes the next chunk from a
// counter and reduces it from every input into every output (ReduceToOutputs). Longer runs of each input
// read faster: at 64 MiB on 8 ranks of a 2-core VM, 128 KiB chunks gave an algbw of 2.08-2.31 GB/s against
// 1.80-1.97 for 32 KiB (comm_bench, interleaved runs).
constexpr size_t kChunkBytes = 128 * 1024;

struct Clique;

// The rendezvous of the k-th collective (or Split) of a communicator.
struct CollSlot {
  explicit CollSlot(int n) : args(n), launched(n, false), reached(n, false), finished(n, false) {}
  std::vector<Args> args;
  std::vector<bool> launched;  // the call registered (launch rendezvous)
  int num_launched = 0;
  std::vector<bool> reached;  // the rank's stream reached the op (barrier A)
  int num_reached = 0;
  std::vector<bool> finished;  // the rank's stream finished its share (barrier B)
  int num_finished = 0;
  std::map<int, std::shared_ptr<Clique>> split;  // Split: color -> the new communicator's clique
  // AllReduce/Reduce: the next chunk to reduce (ranks take chunks from this counter).
  mutable std::atomic<size_t> next_chunk{0};
};

// The rendezvous of the k-th Send from a to b with the k-th Recv on b from a.
struct P2PSlot {
  bool send_launched = false;
  bool recv_launched = false;
  Args send;
  Args recv;
  bool send_ready = false;  // the sender's stream reached the Send: its buffer may be read
  bool copied = false;      // the receiver's stream copied the data: the Send is complete
};

enum class Life { kLive, kDestroyed, kAborted };

// One rank's communicator state; shared with the work it enqueued. Mutable fields are guarded by Clique::mu.
struct RankState {
  RankState(int rank, int n, CommOptions opts)
      : rank(rank),
        options(std::move(opts)),
        timeout(ScaledTimeout(options.timeout)),
        seq(n),
        trace_pid(rank) {}
  const int rank;
  const CommOptions options;
  const std::chrono::milliseconds timeout;
  internal::SeqCounters seq;
  int pending = 0;          // enqueued units of work not yet finished
  absl::Status work_error;  // the first error such work reported (returned by Destroy)
  Life life = Life::kLive;
  Stats stats;
  int trace_pid;  // the rank of the communicator this one was split from, or this rank (host_comm.h)
};

struct Clique {
  Clique(int n, std::string name) : n(n), name(std::move(name)) {}
  const int n;
  const std::string name;
  std::mutex mu;
  std::condition_variable cv;  // notified on every change below
  absl::Status error;          // the first fatal error (timeout, abort): every wait then fails with it
  int active = 0;              // copies/reductions touching user buffers right now
  std::map<uint64_t, std::shared_ptr<CollSlot>> colls;
  std::map<std::tuple<int, int, uint64_t>, std::shared_ptr<P2PSlot>> p2p;
};

// One launched (or grouped) operation of one rank.
struct Op {
  std::shared_ptr<Clique> clique;
  std::shared_ptr<RankState> rank;
  Stream* stream = nullptr;
  Args args;
  uint64_t seq = 0;  // 0-based; messages print seq + 1
  std::shared_ptr<CollSlot> coll;
  std::shared_ptr<P2PSlot> p2p;
  bool registered = false;
  absl::Status status;

  internal::TraceWho Who() const { return {rank->rank, clique->n, rank->trace_pid, &clique->name}; }

  // "AllReduce #4 on comm 'x'" / "Send #1 from rank 0 to rank 1 on comm 'x'"
  std::string Label() const {
    const int r = rank->rank;
    if (args.kind == Kind::kSend) {
      return absl::StrCat("Send #", seq + 1, " from rank ", r, " to rank ", args.peer, " on comm '",
                          clique->name, "'");
    }
    if (args.kind == Kind::kRecv) {
      return absl::StrCat("Recv #", seq + 1, " on rank ", r, " from rank ", args.peer, " on comm '",
                          clique->name, "'");
    }
    return absl::StrCat(KindName(args.kind), " #", seq + 1, " on comm '", clique->name, "'");
  }
};

class GroupedThreadsOp final : public internal::GroupedOp {
 public:
  explicit GroupedThreadsOp(std::shared_ptr<Op> op) : op(std::move(op)) {}
  Backend backend() const override { return Backend::kThreads; }
  std::shared_ptr<Op> op;
};

// Waits (clique mutex held through `lock`) until pred(), the clique's error, or the deadline. A timeout
// becomes the clique's error, so every other waiter of the clique fails with it too.
template <typename Pred, typename Message>
absl::Status WaitFor(std::unique_lock<std::mutex>& lock, Clique& clique, Clock::time_point deadline,
                     Pred pred, Message message) {
  while (true) {
    if (!clique.error.ok()) return Fresh(clique.error);
    if (pred()) return absl::OkStatus();
    if (clique.cv.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (!clique.error.ok()) return Fresh(clique.error);
      if (pred()) return absl::OkStatus();
      absl::Status timeout = absl::DeadlineExceededError(message());
      clique.error = Fresh(timeout);
      clique.cv.notify_all();
      return timeout;
    }
  }
}

// After an error: waits until no rank touches user buffers any more (copies in flight are short).
void WaitQuiescent(std::unique_lock<std::mutex>& lock, Clique& clique) {
  clique.cv.wait(lock, [&] { return clique.active == 0; });
}

// Copies `bytes` to dst with streaming stores (streaming_store.h), single bytes up to its first 16-byte
// boundary and after its last whole 64-byte block.
void StreamingCopy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) Stream64(d + i, s + i);
  std::memcpy(d + i, s + i, bytes - i);
}

// Operations whose arrays are at least this large write their outputs with streaming stores.
constexpr size_t kStreamingBytes = size_t{1} << 20;

// Whether an operation whose arrays are `op_bytes` long writes its outputs with streaming stores.
bool Streaming(size_t op_bytes) { return kStreamingStores && op_bytes >= kStreamingBytes; }

// Copies into a user output buffer of an operation of `op_bytes` bytes.
void CopyOut(void* dst, const void* src, size_t bytes, size_t op_bytes) {
  if (Streaming(op_bytes)) {
    StreamingCopy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

// Rank r's share of a collective: all reads and writes of user buffers happen here.
void RunShare(const CollSlot& slot, int r, int n) {
  const Args& a = slot.args[r];
  const size_t elem = SizeOf(a.dtype);
  const size_t chunk = kChunkBytes / elem;
  const size_t op_bytes = a.count * elem;
  switch (a.kind) {
    case Kind::kAllReduce:
    case Kind::kReduce: {
      // Each chunk is reduced by one rank, straight from every rank's input, and written to every output
      // (Reduce: the root's) in the same pass (ReduceToOutputs). Ranks take chunks from a shared counter, so
      // every rank thread works on the reduction and a rank whose thread is descheduled (a busy machine)
      // takes fewer chunks.
      const bool all = a.kind == Kind::kAllReduce;
      std::vector<const void*> in(n);
      std::vector<void*> out(all ? n : 1);
      const size_t chunks = (a.count + chunk - 1) / chunk;
      std::atomic<size_t>& next = slot.next_chunk;
      for (size_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
        const size_t off = c * chunk;
        for (int p = 0; p < n; ++p) in[p] = At(slot.args[p].send, off * elem);
        for (size_t o = 0; o < out.size(); ++o) {
          out[o] = At(slot.args[all ? static_cast<int>(o) : a.root].recv, off * elem);
        }
        ReduceToOutputs(in.data(), n, out.data(), static_cast<int>(out.size()),
                        std::min(chunk, a.count - off), a.dtype, a.op, Streaming(op_bytes));
      }
      break;
    }
    case Kind::kBroadcast: {
      const void* src = slot.args[a.root].send;
      if (a.recv != src) CopyOut(a.recv, src, op_bytes, op_bytes);
      break;
    }
    case Kind::kAllGather: {
      for (int p = 0; p < n; ++p) {
        void* dst = At(a.recv, p * a.count * elem);
        if (dst != slot.args[p].send) CopyOut(dst, slot.args[p].send, op_bytes, op_bytes * n);
      }
      break;
    }
    case Kind::kReduceScatter: {
      // This rank's slice of every input, reduced into its own output in one pass.
      std::vector<const void*> in(n);
      const size_t base = static_cast<size_t>(r) * a.count;
      for (int p = 0; p < n; ++p) in[p] = At(slot.args[p].send, base * elem);
      void* out = a.recv;
      ReduceToOutputs(in.data(), n, &out, 1, a.count, a.dtype, a.op, Streaming(op_bytes * n));
      break;
    }
    case Kind::kAllToAll: {
      for (int p = 0; p < n; ++p) {
        CopyOut(At(a.recv, p * a.count * elem), At(slot.args[p].send, r * a.count * elem), op_bytes,
                op_bytes * n);
      }
      break;
    }
    default:
      break;
  }
  StoreFence();
}

std::vector<int> Ranks(const std::vector<bool>& flags, bool value) {
  std::vector<int> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == value) out.push_back(static_cast<int>(i));
  }
  return out;
}

// Stream side of a collective: barrier A, the share, barrier B.
absl::Status RunCollective(Op& op) {
  Clique& c = *op.clique;
  CollSlot& slot = *op.coll;
  const int r = op.rank->rank;
  std::unique_lock<std::mutex> lock(c.mu);
  slot.reached[r] = true;
  ++slot.num_reached;
  c.cv.notify_all();
  absl::Status status = WaitFor(
      lock, c, Clock::now() + op.rank->timeout, [&] { return slot.num_reached == c.n; },
      [&] {
        return absl::StrCat(
            op.Label(), " (stream work): rank ", r, " waited ", op.rank->timeout.count(),
            " ms for every rank's stream to reach it; reached: ", RankList(Ranks(slot.reached, true)),
            "; not reached: ", RankList(Ranks(slot.reached, false)));
      });
  if (!status.ok()) {
    WaitQuiescent(lock, c);
    return status;
  }
  ++c.active;
  lock.unlock();
  RunShare(slot, r, c.n);
  lock.lock();
  --c.active;
  slot.finished[r] = true;
  ++slot.num_finished;
  c.cv.notify_all();
  status = WaitFor(
      lock, c, Clock::now() + op.rank->timeout, [&] { return slot.num_finished == c.n; },
      [&] {
        return absl::StrCat(
            op.Label(), " (stream work): rank ", r, " waited ", op.rank->timeout.count(),
            " ms for every rank to finish it; finished: ", RankList(Ranks(slot.finished, true)),
            "; not finished: ", RankList(Ranks(slot.finished, false)));
      });
  if (!status.ok()) WaitQuiescent(lock, c);
  return status;
}

absl::Status MarkSendReady(Op& op) {
  Clique& c = *op.clique;
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.error.ok()) return Fresh(c.error);
  op.p2p->send_ready = true;
  c.cv.notify_all();
  return absl::OkStatus();
}

absl::Status RunRecv(Op& op) {
  Clique& c = *op.clique;
  P2PSlot& slot = *op.p2p;
  const int r = op.rank->rank;
  std::unique_lock<std::mutex> lock(c.mu);
  absl::Status status = WaitFor(
      lock, c, Clock::now() + op.rank->timeout, [&] { return slot.send_ready; },
      [&] {
        return absl::StrCat(op.Label(), " (stream work): rank ", r, " waited ", op.rank->timeout.count(),
                            " ms for rank ", op.args.peer,
                            "'s stream to reach the matching Send; it did not");
      });
  if (!status.ok()) {
    WaitQuiescent(lock, c);
    return status;
  }
  ++c.active;
  lock.unlock();
  const size_t bytes = op.args.count * SizeOf(op.args.dtype);
  CopyOut(op.args.recv, slot.send.send, bytes, bytes);
  StoreFence();
  lock.lock();
  --c.active;
  slot.copied = true;
  c.cv.notify_all();
  return absl::OkStatus();
}

absl::Status AwaitCopied(Op& op) {
  Clique& c = *op.clique;
  P2PSlot& slot = *op.p2p;
  const int r = op.rank->rank;
  std::unique_lock<std::mutex> lock(c.mu);
  absl::Status status = WaitFor(
      lock, c, Clock::now() + op.rank->timeout, [&] { return slot.copied; },
      [&] {
        return absl::StrCat(op.Label(), " (stream work): rank ", r, " waited ", op.rank->timeout.count(),
                            " ms for rank ", op.args.peer, "'s stream to run the matching Recv; it did not");
      });
  if (!status.ok()) WaitQuiescent(lock, c);
  return status;
}

// The stream work of one launch: the ops of one stream, run as one unit (see the file comment).
absl::Status RunUnit(const std::vector<std::shared_ptr<Op>>& ops) {
  const int64_t start_ns = trace::Enabled() ? trace::NowNs() : 0;
  internal::NameStreamThread(ops.front()->rank->trace_pid);
  std::vector<absl::Status> results(ops.size());
  std::vector<bool> ready(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->args.kind == Kind::kSend) {
      results[i] = MarkSendReady(*ops[i]);
      ready[i] = results[i].ok();
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (IsCollective(ops[i]->args.kind)) results[i] = RunCollective(*ops[i]);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->args.kind == Kind::kRecv) results[i] = RunRecv(*ops[i]);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ready[i]) results[i] = AwaitCopied(*ops[i]);
  }
  // The unit completes as a whole: each op's stream event ends here.
  for (size_t i = 0; i < ops.size(); ++i) {
    internal::TraceCall("comm.stream", ops[i]->args, ops[i]->Who(), ops[i]->seq, start_ns, results[i],
                        ops.size() > 1);
  }
  absl::Status first;
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& op = *ops[i];
    std::lock_guard<std::mutex> lock(op.clique->mu);
    if (!results[i].ok()) {
      if (op.rank->work_error.ok()) op.rank->work_error = Fresh(results[i]);
      if (first.ok()) first = results[i];
    }
    --op.rank->pending;
    op.clique->cv.notify_all();
  }
  return first;
}

// Registers op's arguments in its rendezvous slot (the "launch"). Clique mutex held.
absl::Status Register(Op& op) {
  Clique& c = *op.clique;
  RankState& rs = *op.rank;
  if (rs.life == Life::kDestroyed) {
    return absl::FailedPreconditionError(
        absl::StrCat(op.Label(), ": rank ", rs.rank, " already destroyed it"));
  }
  if (rs.life == Life::kAborted) {
    return absl::FailedPreconditionError(absl::StrCat(op.Label(), ": rank ", rs.rank, " already aborted it"));
  }
  if (!c.error.ok()) return Fresh(c.error);
  const int r = rs.rank;
  if (IsCollective(op.args.kind)) {
    std::shared_ptr<CollSlot>& slot = c.colls[op.seq];
    if (!slot) slot = std::make_shared<CollSlot>(c.n);
    op.coll = slot;
    slot->args[r] = op.args;
    slot->launched[r] = true;
    if (++slot->num_launched == c.n) c.colls.erase(op.seq);  // everyone holds it now
  } else {
    const bool is_send = op.args.kind == Kind::kSend;
    const auto key =
        is_send ? std::make_tuple(r, op.args.peer, op.seq) : std::make_tuple(op.args.peer, r, op.seq);
    std::shared_ptr<P2PSlot>& slot = c.p2p[key];
    if (!slot) slot = std::make_shared<P2PSlot>();
    op.p2p = slot;
    if (is_send) {
      slot->send = op.args;
      slot->send_launched = true;
    } else {
      slot->recv = op.args;
      slot->recv_launched = true;
    }
    if (slot->send_launched && slot->recv_launched) c.p2p.erase(key);
  }
  op.registered = true;
  c.cv.notify_all();
  return absl::OkStatus();
}

// Waits until every rank (collective) or the peer (Send/Recv) launched, then checks that the calls agree.
absl::Status AwaitLaunch(Op& op) {
  Clique& c = *op.clique;
  const int r = op.rank->rank;
  const auto timeout_ms = op.rank->timeout.count();
  std::unique_lock<std::mutex> lock(c.mu);
  const auto deadline = Clock::now() + op.rank->timeout;
  if (IsCollective(op.args.kind)) {
    CollSlot& slot = *op.coll;
    const auto all_launched = [&] { return slot.num_launched == c.n; };
    absl::Status waited = WaitFor(lock, c, deadline, all_launched, [&] {
      return absl::StrCat(op.Label(), ": rank ", r, " waited ", timeout_ms,
                          " ms for every rank to launch it; arrived: ", RankList(Ranks(slot.launched, true)),
                          "; missing: ", RankList(Ranks(slot.launched, false)));
    });
    // A mismatch is decided from the arguments alone: when every rank launched, it is reported even if a
    // peer aborted meanwhile (the abort is a consequence of the mismatch, not its cause). No data moves.
    if (!waited.ok() && !all_launched()) return waited;
    RETURN_IF_ERROR(internal::CheckSameCollective(op.seq, c.name, slot.args));
    return waited;
  }
  P2PSlot& slot = *op.p2p;
  const bool is_send = op.args.kind == Kind::kSend;
  const auto peer_launched = [&] { return is_send ? slot.recv_launched : slot.send_launched; };
  absl::Status waited = WaitFor(lock, c, deadline, peer_launched, [&] {
    return absl::StrCat(op.Label(), ": rank ", r, " waited ", timeout_ms, " ms for rank ", op.args.peer,
                        " to launch the matching ", is_send ? "Recv" : "Send", "; rank ", op.args.peer,
                        " did not");
  });
  if (!waited.ok() && !peer_launched()) return waited;  // as above: a mismatch outranks a later abort
  const int src = is_send ? r : op.args.peer;
  const int dst = is_send ? op.args.peer : r;
  RETURN_IF_ERROR(internal::CheckSameP2P(op.seq, c.name, src, dst, slot.send, slot.recv));
  return waited;
}

// Launches ops (one call, or a whole group): register all, await all, enqueue the matched ones on their
// streams (the ops of one stream as one unit). Returns the first error.
absl::Status Launch(const std::vector<std::shared_ptr<Op>>& ops, bool grouped) {
  const int64_t start_ns = trace::Enabled() ? trace::NowNs() : 0;
  for (auto& op : ops) {
    std::lock_guard<std::mutex> lock(op->clique->mu);
    op->status = Register(*op);
  }
  for (auto& op : ops) {
    if (op->status.ok()) op->status = AwaitLaunch(*op);
  }
  for (auto& op : ops)
    internal::TraceCall("comm", op->args, op->Who(), op->seq, start_ns, op->status, grouped);
  std::vector<std::pair<Stream*, std::vector<std::shared_ptr<Op>>>> units;
  for (auto& op : ops) {
    if (!op->status.ok() || op->args.kind == Kind::kSplit) continue;
    auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.first == op->stream; });
    if (it == units.end()) {
      units.emplace_back(op->stream, std::vector<std::shared_ptr<Op>>{});
      it = units.end() - 1;
    }
    it->second.push_back(op);
    std::lock_guard<std::mutex> lock(op->clique->mu);
    ++op->rank->pending;
    internal::CountCall(op->args, op->clique->n, op->rank->stats);
  }
  for (auto& [stream, unit] : units) {
    stream->Enqueue([unit = std::move(unit)] { return RunUnit(unit); });
  }
  for (auto& op : ops) {
    if (!op->status.ok()) return op->status;
  }
  return absl::OkStatus();
}

std::atomic<uint64_t> g_comm_counter{0};

class ThreadsComm final : public internal::HostComm {
 public:
  ThreadsComm(std::shared_ptr<Clique> clique, std::shared_ptr<RankState> state)
      : clique_(std::move(clique)), state_(std::move(state)) {}
  ~ThreadsComm() override {
    if (!released()) (void)Destroy();
  }

  int rank() const override { return state_->rank; }
  int size() const override { return clique_->n; }
  Backend backend() const override { return Backend::kThreads; }
  const CommOptions& options() const override { return state_->options; }

  absl::Status Destroy() override {
    std::unique_lock<std::mutex> lock(clique_->mu);
    RETURN_IF_ERROR(UsableLocked("Destroy"));
    clique_->cv.wait(lock, [&] { return state_->pending == 0; });
    if (state_->life == Life::kAborted) {  // another thread aborted while this one waited
      return absl::AbortedError(Where("Destroy") + ": aborted while Destroy waited for pending work");
    }
    state_->life = Life::kDestroyed;
    clique_->cv.notify_all();
    return Fresh(state_->work_error);
  }

  absl::Status Abort() override {
    std::unique_lock<std::mutex> lock(clique_->mu);
    RETURN_IF_ERROR(UsableLocked("Abort"));
    state_->life = Life::kAborted;
    if (clique_->error.ok()) {
      clique_->error =
          absl::AbortedError(absl::StrCat("rank ", state_->rank, " aborted comm '", clique_->name, "'"));
    }
    clique_->cv.notify_all();
    WaitQuiescent(lock, *clique_);  // nobody touches user buffers once Abort returns
    return absl::OkStatus();
  }

  absl::Status GetAsyncError() override {
    std::lock_guard<std::mutex> lock(clique_->mu);
    RETURN_IF_ERROR(UsableLocked("GetAsyncError"));
    return Fresh(clique_->error);
  }

  bool released() const override {
    std::lock_guard<std::mutex> lock(clique_->mu);
    return state_->life != Life::kLive;
  }

  absl::StatusOr<std::unique_ptr<Comm>> Split(int color, int key) override {
    if (internal::InGroup()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Split on comm '", clique_->name,
                       "': not allowed between GroupStart and GroupEnd on the threads backend"));
    }
    auto op = std::make_shared<Op>();
    op->clique = clique_;
    op->rank = state_;
    op->args.kind = Kind::kSplit;
    op->args.color = color;
    op->args.key = key;
    {
      std::lock_guard<std::mutex> lock(clique_->mu);
      RETURN_IF_ERROR(UsableLocked("Split"));
      op->seq = state_->seq.next_coll++;
    }
    RETURN_IF_ERROR(Launch({op}, /*grouped=*/false));
    if (color < 0) return std::unique_ptr<Comm>();
    // Members: ranks with this color, ordered by (key, old rank).
    std::vector<std::pair<int, int>> members;
    std::shared_ptr<Clique> child;
    {
      std::lock_guard<std::mutex> lock(clique_->mu);
      for (int p = 0; p < clique_->n; ++p) {
        if (op->coll->args[p].color == color) members.emplace_back(op->coll->args[p].key, p);
      }
      std::sort(members.begin(), members.end());
      std::shared_ptr<Clique>& slot = op->coll->split[color];
      if (!slot) {
        slot = std::make_shared<Clique>(static_cast<int>(members.size()),
                                        absl::StrCat(clique_->name, ".", color));
      }
      child = slot;
    }
    int new_rank = 0;
    while (members[new_rank].second != state_->rank) ++new_rank;
    CommOptions options = state_->options;
    options.name = child->name;
    auto state = std::make_shared<RankState>(new_rank, child->n, options);
    state->trace_pid = state_->trace_pid;
    return std::unique_ptr<Comm>(new ThreadsComm(child, std::move(state)));
  }

  Stats stats() const override {
    std::lock_guard<std::mutex> lock(clique_->mu);
    return state_->stats;
  }
  void ResetStats() override {
    std::lock_guard<std::mutex> lock(clique_->mu);
    state_->stats = Stats();
  }

 private:
  std::string Where(const char* what) const {
    return absl::StrCat(what, " on comm '", clique_->name, "' (rank ", state_->rank, ")");
  }

  // FAILED_PRECONDITION after Destroy/Abort; the communicator's error once it broke. Clique mutex held.
  absl::Status UsableLocked(const char* what) const {
    if (state_->life == Life::kDestroyed) {
      return absl::FailedPreconditionError(Where(what) + ": the communicator was destroyed");
    }
    if (state_->life == Life::kAborted) {
      return absl::FailedPreconditionError(Where(what) + ": the communicator was aborted");
    }
    return absl::OkStatus();
  }

  absl::Status Validate(const Args& a) const {
    return internal::ValidateArgs(a, state_->rank, clique_->n, Where(KindName(a.kind)));
  }

  absl::Status Call(const Args& a, Stream& stream) override {
    auto op = std::make_shared<Op>();
    op->clique = clique_;
    op->rank = state_;
    op->stream = &stream;
    op->args = a;
    absl::Status status = [&]() -> absl::Status {
      std::lock_guard<std::mutex> lock(clique_->mu);
      RETURN_IF_ERROR(UsableLocked(KindName(a.kind)));
      return absl::OkStatus();
    }();
    if (status.ok()) status = Validate(a);
    if (!status.ok()) {
      if (internal::InGroup()) internal::RecordGroupError(status);
      return status;
    }
    {
      std::lock_guard<std::mutex> lock(clique_->mu);
      op->seq = state_->seq.Take(a);
    }
    if (internal::InGroup()) {
      internal::AddToGroup(std::make_unique<GroupedThreadsOp>(std::move(op)));
      return absl::OkStatus();
    }
    return Launch({op}, /*grouped=*/false);
  }

  std::shared_ptr<Clique> clique_;
  std::shared_ptr<RankState> state_;
};

std::string CliqueName(const CommOptions& options) {
  if (!options.name.empty()) return options.name;
  return absl::StrCat("threads", g_comm_counter.fetch_add(1));
}

absl::Status CheckOptions(const CommOptions& options) {
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommOptions.timeout must be positive, got ", options.timeout.count(), " ms"));
  }
  return absl::OkStatus();
}

// --- CommInitRank's registry: cliques being assembled, keyed by unique id ---

struct Joining {
  int nranks = 0;
  std::vector<bool> joined;
  int num_joined = 0;
  int num_left = 0;  // joined ranks that returned
  std::shared_ptr<Clique> clique;
  absl::Status failed;  // set when a joiner timed out: late joiners fail at once
};

struct Registry {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::shared_ptr<Joining>> pending;
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();  // never destroyed: threads may still use it at exit
  return *registry;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  auto clique = std::make_shared<Clique>(n, CliqueName(options));
  CommOptions opts = options;
  opts.name = clique->name;
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < n; ++r) {
    comms.push_back(std::make_unique<ThreadsComm>(clique, std::make_shared<RankState>(r, n, opts)));
  }
  return comms;
}

absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank,
                                               const CommOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  const std::chrono::milliseconds timeout = ScaledTimeout(options.timeout);
  Registry& reg = GlobalRegistry();
  std::unique_lock<std::mutex> lock(reg.mu);
  std::shared_ptr<Joining>& entry = reg.pending[id.value];
  if (!entry) {
    entry = std::make_shared<Joining>();
    entry->nranks = nranks;
    entry->joined.assign(nranks, false);
    CommOptions named = options;
    if (named.name.empty()) named.name = absl::StrCat("id", id.value % 1000000);
    entry->clique = std::make_shared<Clique>(nranks, named.name);
  }
  std::shared_ptr<Joining> j = entry;
  if (!j->failed.ok()) return Fresh(j->failed);
  if (j->nranks != nranks) {
    return absl::InvalidArgumentError(absl::StrCat("CommInitRank: rank ", rank, " was given ", nranks,
                                                   " ranks, but an earlier rank of this id was given ",
                                                   j->nranks));
  }
  if (j->joined[rank]) {
    return absl::InvalidArgumentError(absl::StrCat("CommInitRank: rank ", rank, " joined this id twice"));
  }
  j->joined[rank] = true;
  ++j->num_joined;
  reg.cv.notify_all();
  const auto deadline = Clock::now() + timeout;
  while (j->failed.ok() && j->num_joined < j->nranks) {
    if (reg.cv.wait_until(lock, deadline) == std::cv_status::timeout && j->failed.ok() &&
        j->num_joined < j->nranks) {
      j->failed = absl::DeadlineExceededError(absl::StrCat(
          "CommInitRank on comm '", j->clique->name, "': rank ", rank, " waited ", timeout.count(),
          " ms for all ", nranks, " ranks to join; joined: ", RankList(Ranks(j->joined, true)),
          "; missing: ", RankList(Ranks(j->joined, false))));
      reg.cv.notify_all();
    }
  }
  if (!j->failed.ok()) return Fresh(j->failed);  // the entry stays: late joiners fail at once
  if (++j->num_left == j->nranks) reg.pending.erase(id.value);
  CommOptions opts = options;
  opts.name = j->clique->name;
  return std::unique_ptr<Comm>(new ThreadsComm(j->clique, std::make_shared<RankState>(rank, nranks, opts)));
}

absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> grouped) {
  std::vector<std::shared_ptr<Op>> ops;
  ops.reserve(grouped.size());
  for (auto& g : grouped) ops.push_back(static_cast<GroupedThreadsOp&>(*g).op);
  return Launch(ops, /*grouped=*/true);
}

}  // namespace distlab::comm::threads
