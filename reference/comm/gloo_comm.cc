// The gloo backend: one rank per process (or per thread, for tests), data moved by Gloo over TCP.
//
// Rendezvous. Ranks meet through a Store (store.h) under a key prefix: each writes its WORLD_SIZE, checks it
// against rank 0's and waits for every rank's key (a missing rank or a wrong WORLD_SIZE is a clear error, not
// a hang); then Gloo's connectFullMesh opens one TCP connection per pair of ranks through the same store, and
// a barrier ends the init, after which nobody touches the store again (except Split).
//
// Work. A call validates its arguments, takes a sequence number and enqueues the work on the caller's Stream
// at once: unlike the threads backend it does not wait for the peers to launch (NCCL does not either), so
// launch-time problems surface at Stream::Synchronize. The stream thread runs Gloo's algorithms (ring
// all-reduce, binomial broadcast, ...): the k-th collective of every rank uses Gloo tag 2k+1, so collectives
// queued on different streams never mix. Before the data, every collective all-gathers a small descriptor
// (kind, count, dtype, op, root) and every Send/Recv pair exchanges (count, dtype): a mismatch is the same
// INVALID_ARGUMENT naming each rank's call as on the threads backend -- never a wrong answer. Reductions use
// the runtime's own ReduceInto (every dtype and op; avg = sum, then FinishReduce). ReduceScatter is Gloo's
// all-reduce of a copy of the input followed by keeping this rank's slice (Gloo 0.5 has no options-based
// reduce-scatter): correct, with twice the traffic of a ring reduce-scatter.
//
// Send/Recv use Gloo's unbound buffers: the k-th Send from a to b meets the k-th Recv on b from a. Gloo sends
// the data only after the receiver posted its buffer, so a Send completes only when the matching Recv runs
// (no eager buffering) and two ranks that both Send first deadlock until the timeout, as with NCCL. A group's
// operations of one stream run as one unit: descriptors of every Send/Recv are posted first, then the
// collectives run, then the payloads are posted together and awaited -- a ring step cannot deadlock.
//
// Failures. Every communicator runs one monitor thread per peer, blocked on a receive that the peer only
// answers when it leaves: "bye" (Destroy), "abort" (Abort). When the peer's connection breaks without either
// (the process exited or was killed), Gloo fails that receive at once; the monitor then marks the
// communicator broken with UNAVAILABLE naming that rank and fails every blocked operation of this rank
// immediately (its connections close, which in turn wakes the ranks blocked on it). A peer's Abort gives
// ABORTED naming the rank. The bound: a rank whose process dies is noticed by every peer as soon as the
// kernel closes its sockets (milliseconds); a peer that hangs without dying (or a lost network) is noticed
// when a wait passes the communicator's timeout, DEADLINE_EXCEEDED. Nothing of a broken communicator is
// reused.
//
// What Gloo cannot give: the watchdog cannot name the ranks that did not arrive (it sees only its own
// neighbours); everything else of the API (every dtype and op, Split, Stats) is supported.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/broadcast.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/host_comm.h"
#include "reference/comm/internal.h"
#include "reference/comm/store.h"
#include "reference/comm/types.h"
#include "reference/trace/trace.h"

namespace distlab::comm::gloo_backend {
namespace {

using Clock = std::chrono::steady_clock;
using internal::Args;
using internal::At;
using internal::Fresh;
using internal::IsCollective;
using internal::Kind;
using internal::KindName;
using internal::RankList;
using UB = gloo::transport::UnboundBuffer;

// Slots of our own messages (Gloo's collectives use prefixes 0x01-0x08 in the top byte).
constexpr uint64_t kMonitorSlot = uint64_t{0xd1} << 56;
constexpr uint64_t kDataPrefix = uint64_t{0xd2} << 56;
constexpr uint64_t kDescPrefix = uint64_t{0xd3} << 56;
constexpr uint64_t kWakeSlot = uint64_t{0xd4} << 56;
constexpr uint64_t kSeqMask = (uint64_t{1} << 54) - 1;
// Monitor messages.
constexpr uint32_t kBye = 1;
constexpr uint32_t kAbortMsg = 2;
constexpr uint32_t kLost = 3;  // the sender lost its connection to another rank (named in the message)
// How long a monitor that saw a connection close waits for a peer's message naming an earlier cause.
constexpr std::chrono::milliseconds kExplainWait{200};
// How long a monitor waits: "forever", without overflowing the clock arithmetic inside Gloo.
constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);

// The descriptor ranks compare before a collective.
using Desc = std::array<int64_t, 5>;
Desc ToDesc(const Args& a) {
  return {static_cast<int64_t>(a.kind), static_cast<int64_t>(a.count), static_cast<int64_t>(a.dtype),
          static_cast<int64_t>(a.op), a.root};
}

// A descriptor as the Args it was made of (the fields the mismatch check compares and names).
Args FromDesc(const Desc& d) {
  Args a;
  a.kind = static_cast<Kind>(d[0]);
  a.count = static_cast<size_t>(d[1]);
  a.dtype = static_cast<DataType>(d[2]);
  a.op = static_cast<RedOp>(d[3]);
  a.root = static_cast<int>(d[4]);
  return a;
}

// The gloo::rendezvous::Store Gloo's connectFullMesh talks to: our Store under a key prefix.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(comm::Store& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_.Set(prefix_ + key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> value = store_.Get(prefix_ + key, timeout_);
    Check(value.status());
    return std::vector<char>(value->begin(), value->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    Check(store_.Wait(full, std::min(timeout, timeout_)));
  }

 private:
  static void Check(const absl::Status& s) {
    if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  }
  comm::Store& store_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

enum class Life { kLive, kDestroyed, kAborted };

// One rank's communicator; shared with its stream work and monitors.
struct State {
  int rank = 0;
  int n = 1;
  int trace_pid = 0;  // the rank of the communicator this one was split from, or this rank (host_comm.h)
  CommOptions options;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<comm::Store> store;
  std::string prefix;                // of this communicator's keys in the store
  std::string host;                  // the address Gloo listens on
  std::function<void()> on_release;  // rank 0 of a file-store clique removes its directory
  std::shared_ptr<gloo::Context> ctx;

  std::mutex mu;
  std::condition_variable cv;
  internal::SeqCounters seq{0};  // sized when the rank count is known
  int pending = 0;               // launched units not yet finished
  int active = 0;                // units inside Gloo right now
  absl::Status work_error;
  absl::Status broken;  // why the communicator cannot be used any more (a peer left, an abort, a timeout)
  int lost_rank = -1;   // the peer whose connection broke first, when that is why
  Life life = Life::kLive;
  bool closing = false;  // our own Destroy/Abort: monitors ignore what follows
  Stats stats;
  std::vector<bool> departed;  // the peer said bye

  // Monitors (one per peer).
  std::vector<std::array<uint32_t, 3>> mon_in;  // {code, sender, the rank the sender lost or ~0}
  std::vector<std::unique_ptr<UB>> mon_bufs;
  std::vector<std::thread> monitors;

  std::string Name() const { return options.name; }

  // Marks the communicator broken (first reason wins) and fails every blocked operation of this rank.
  void Break(const absl::Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (broken.ok()) broken = Fresh(why);
      cv.notify_all();
    }
    FailPairs();
  }

  // Sends {code, rank, lost} to every peer's monitor (best effort: a broken connection is skipped) and waits
  // a moment for the sends, so that the message leaves before this rank's connections close.
  void Tell(uint32_t code, int lost) {
    std::array<uint32_t, 3> msg = {code, static_cast<uint32_t>(rank),
                                   lost >= 0 ? static_cast<uint32_t>(lost) : ~uint32_t{0}};
    std::vector<std::unique_ptr<UB>> bufs;
    for (int p = 0; p < n; ++p) {
      if (p == rank || p == lost) continue;
      try {
        std::unique_ptr<UB> b = ctx->createUnboundBuffer(msg.data(), sizeof(msg));
        b->send(p, kMonitorSlot);
        bufs.push_back(std::move(b));
      } catch (const std::exception&) {
      }
    }
    const auto wait = std::min(timeout, std::chrono::milliseconds(1000));
    for (auto& b : bufs) {
      try {
        b->waitSend(wait);
      } catch (const std::exception&) {
      }
    }
  }

  // Fails every pending operation of this rank's Gloo context at once and closes its connections. Gloo
  // offers no public call for that, but it does it itself when a wait on an unbound buffer times out; so we
  // post a receive nobody answers and wait 1 ms for it. (A connection already broken refuses the receive:
  // then the next peer's is used.) The operations woken see Gloo's "Application timeout caused pair closure";
  // FromGloo replaces it with `broken`, the real reason, which is set before this runs.
  void FailPairs() {
    uint64_t dummy = 0;
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      try {
        std::unique_ptr<UB> buf = ctx->createUnboundBuffer(&dummy, sizeof(dummy));
        buf->recv(p, kWakeSlot);
        buf->waitRecv(std::chrono::milliseconds(1));
      } catch (const std::exception& e) {
        if (std::string(e.what()).find("Timed out") != std::string::npos) return;  // done: all pairs failed
      }
    }
  }

  // The status of a Gloo exception: the reason the communicator broke if a monitor knows it (waiting a
  // moment for it, as the monitor wakes at the same time), otherwise Gloo's own message.
  absl::Status FromGloo(const std::string& where, const std::exception& e) {
    const std::string what = e.what();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return !broken.ok(); });
    if (!broken.ok()) return absl::Status(broken.code(), absl::StrCat(where, ": ", broken.message()));
    absl::Status status;
    if (what.find("Timed out") != std::string::npos || what.find("timeout") != std::string::npos) {
      status = absl::DeadlineExceededError(absl::StrCat(where, ": rank ", rank,
                                                        " waited longer than the timeout (", timeout.count(),
                                                        " ms) for its peers [gloo: ", what, "]"));
    } else {
      status =
          absl::UnavailableError(absl::StrCat(where, ": rank ", rank, " failed in Gloo [gloo: ", what, "]"));
    }
    broken = Fresh(status);
    cv.notify_all();
    lock.unlock();
    FailPairs();
    return status;
  }

  absl::Status Broken(const std::string& where) {
    std::lock_guard<std::mutex> lock(mu);
    if (broken.ok()) return absl::OkStatus();
    return absl::Status(broken.code(), absl::StrCat(where, ": ", broken.message()));
  }
};

void Monitor(std::shared_ptr<State> s, int peer) {
  UB& buf = *s->mon_bufs[peer];
  try {
    if (!buf.waitRecv(nullptr, kForever)) return;  // our own shutdown
    const uint32_t code = s->mon_in[peer][0];
    if (code == kBye) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->departed[peer] = true;
      return;
    }
    if (code == kLost) {
      const uint32_t lost = s->mon_in[peer][2];
      {
        std::lock_guard<std::mutex> lock(s->mu);
        if (s->broken.ok()) s->lost_rank = static_cast<int>(lost);
      }
      s->Break(absl::UnavailableError(
          absl::StrCat("comm '", s->Name(), "': rank ", peer, " lost the connection to rank ", lost,
                       " (its process exited or was killed, or the network failed)")));
      return;
    }
    if (code == kAbortMsg) {
      // A rank that aborts because it lost another says which: the message names the rank that died first.
      const uint32_t lost = s->mon_in[peer][2];
      std::string why = absl::StrCat("rank ", peer, " aborted comm '", s->Name(), "'");
      if (lost != ~uint32_t{0}) absl::StrAppend(&why, " after it lost the connection to rank ", lost);
      s->Break(absl::AbortedError(why));
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->closing || s->departed[peer]) return;
    }
    if (what.find("Application timeout") != std::string::npos) {
      s->Break(absl::DeadlineExceededError(
          absl::StrCat("an operation on comm '", s->Name(), "' waited longer than the timeout (",
                       s->timeout.count(), " ms) for its peers; the communicator is broken")));
    } else {
      bool first;
      {
        std::unique_lock<std::mutex> lock(s->mu);
        // A peer that learns of a failure closes all its connections at once (FailPairs), so its connection
        // can close here a moment before the message that explains it (an abort, a lost rank) arrives on
        // another connection. Give that message a moment, so the first cause is named, not the messenger.
        s->cv.wait_for(lock, kExplainWait, [&] { return !s->broken.ok() || s->closing; });
        if (s->closing) return;
        first = s->broken.ok();
        if (first) s->lost_rank = peer;
      }
      // The others learn which rank was lost before this rank's connections close (they would otherwise see
      // this rank vanish and could blame it).
      if (first) s->Tell(kLost, peer);
      s->Break(absl::UnavailableError(
          absl::StrCat("comm '", s->Name(), "': lost the connection to rank ", peer,
                       " (its process exited or was killed, or the network failed) [gloo: ", what, "]")));
    }
  }
}

// Integer type of an element's size: Gloo counts elements of sizeof(T) bytes and never splits one.
template <typename F>
void WithElem(DataType dtype, F f) {
  switch (SizeOf(dtype)) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

std::function<void(void*, const void*, const void*, size_t)> ReduceFn(DataType dtype, RedOp op) {
  const size_t elem = SizeOf(dtype);
  return [dtype, op, elem](void* out, const void* a, const void* b, size_t k) {
    if (out == a) {
      ReduceInto(out, b, k, dtype, op);
    } else if (out == b) {
      ReduceInto(out, a, k, dtype, op);  // every op is commutative
    } else {
      std::memmove(out, a, k * elem);
      ReduceInto(out, b, k, dtype, op);
    }
  };
}

// One launched operation.
struct Op {
  std::shared_ptr<State> st;
  Stream* stream = nullptr;
  Args args;
  uint64_t seq = 0;

  std::string Label() const {
    const int r = st->rank;
    if (args.kind == Kind::kSend) {
      return absl::StrCat("Send #", seq + 1, " from rank ", r, " to rank ", args.peer, " on comm '",
                          st->Name(), "'");
    }
    if (args.kind == Kind::kRecv) {
      return absl::StrCat("Recv #", seq + 1, " on rank ", r, " from rank ", args.peer, " on comm '",
                          st->Name(), "'");
    }
    return absl::StrCat(KindName(args.kind), " #", seq + 1, " on comm '", st->Name(), "'");
  }
  uint32_t Tag(int which) const { return static_cast<uint32_t>(seq * 2 + which); }
  internal::TraceWho Who() const { return {st->rank, st->n, st->trace_pid, &st->options.name}; }
};

class GroupedGlooOp final : public internal::GroupedOp {
 public:
  explicit GroupedGlooOp(std::shared_ptr<Op> op) : op(std::move(op)) {}
  Backend backend() const override { return Backend::kGloo; }
  std::shared_ptr<Op> op;
};

// All-gathers one small array of every rank (Gloo's allgather; also the barrier of init and Split).
std::vector<int64_t> AllGatherSmall(State& s, const std::vector<int64_t>& mine, uint32_t tag) {
  std::vector<int64_t> in = mine;
  std::vector<int64_t> out(mine.size() * s.n);
  gloo::AllgatherOptions o(s.ctx);
  o.setInput(in.data(), in.size());
  o.setOutput(out.data(), out.size());
  o.setTag(tag);
  o.setTimeout(s.timeout);
  gloo::allgather(o);
  return out;
}

// The data part of a collective (descriptors already agree). Throws Gloo's exceptions.
void RunCollectiveData(Op& op) {
  State& s = *op.st;
  const Args& a = op.args;
  const int n = s.n;
  const int r = s.rank;
  const size_t elem = SizeOf(a.dtype);
  const size_t bytes = a.count * elem;
  if (a.count == 0) return;
  const uint32_t tag = op.Tag(1);
  void* send = const_cast<void*>(a.send);
  switch (a.kind) {
    case Kind::kAllReduce:
      WithElem(a.dtype, [&](auto t) {
        using T = decltype(t);
        gloo::AllreduceOptions o(s.ctx);
        if (send != a.recv) o.setInput(static_cast<T*>(send), a.count);
        o.setOutput(static_cast<T*>(a.recv), a.count);
        o.setReduceFunction(ReduceFn(a.dtype, a.op));
        o.setTag(tag);
        o.setTimeout(s.timeout);
        gloo::allreduce(o);
      });
      FinishReduce(a.recv, a.count, a.dtype, a.op, n);
      break;
    case Kind::kReduce: {
      std::vector<char> scratch;
      void* out = a.recv;
      if (r != a.root) {
        scratch.resize(bytes);
        out = scratch.data();
      }
      WithElem(a.dtype, [&](auto t) {
        using T = decltype(t);
        gloo::ReduceOptions o(s.ctx);
        if (send != out) o.setInput(static_cast<T*>(send), a.count);
        o.setOutput(static_cast<T*>(out), a.count);
        o.setRoot(a.root);
        o.setReduceFunction(ReduceFn(a.dtype, a.op));
        o.setTag(tag);
        o.setTimeout(s.timeout);
        gloo::reduce(o);
      });
      if (r == a.root) FinishReduce(a.recv, a.count, a.dtype, a.op, n);
      break;
    }
    case Kind::kBroadcast:
      if (r == a.root && send != a.recv) std::memcpy(a.recv, send, bytes);
      WithElem(a.dtype, [&](auto t) {
        using T = decltype(t);
        gloo::BroadcastOptions o(s.ctx);
        o.setOutput(static_cast<T*>(a.recv), a.count);
        o.setRoot(a.root);
        o.setTag(tag);
        o.setTimeout(s.timeout);
        gloo::broadcast(o);
      });
      break;
    case Kind::kAllGather:
      WithElem(a.dtype, [&](auto t) {
        using T = decltype(t);
        gloo::AllgatherOptions o(s.ctx);
        if (send != At(a.recv, r * bytes)) o.setInput(static_cast<T*>(send), a.count);
        o.setOutput(static_cast<T*>(a.recv), a.count * n);
        o.setTag(tag);
        o.setTimeout(s.timeout);
        gloo::allgather(o);
      });
      break;
    case Kind::kReduceScatter: {
      std::vector<char> all(static_cast<const char*>(a.send), At(a.send, bytes * n));
      WithElem(a.dtype, [&](auto t) {
        using T = decltype(t);
        gloo::AllreduceOptions o(s.ctx);
        o.setOutput(reinterpret_cast<T*>(all.data()), a.count * n);
        o.setReduceFunction(ReduceFn(a.dtype, a.op));
        o.setTag(tag);
        o.setTimeout(s.timeout);
        gloo::allreduce(o);
      });
      std::memcpy(a.recv, all.data() + r * bytes, bytes);
      FinishReduce(a.recv, a.count, a.dtype, a.op, n);
      break;
    }
    case Kind::kAllToAll:
      WithElem(a.dtype, [&](auto t) {
        using T = decltype(t);
        gloo::AlltoallOptions o(s.ctx);
        o.setInput(static_cast<T*>(send), a.count * n);
        o.setOutput(static_cast<T*>(a.recv), a.count * n);
        o.setTag(tag);
        o.setTimeout(s.timeout);
        gloo::alltoall(o);
      });
      break;
    default:
      break;
  }
}

absl::Status RunCollective(Op& op) {
  State& s = *op.st;
  RETURN_IF_ERROR(s.Broken(op.Label()));
  try {
    const Desc mine = ToDesc(op.args);
    const std::vector<int64_t> all =
        AllGatherSmall(s, std::vector<int64_t>(mine.begin(), mine.end()), op.Tag(0));
    std::vector<Args> calls(s.n);
    for (int p = 0; p < s.n; ++p) {
      Desc desc;
      std::copy(all.begin() + p * 5, all.begin() + p * 5 + 5, desc.begin());
      calls[p] = FromDesc(desc);
    }
    RETURN_IF_ERROR(internal::CheckSameCollective(op.seq, s.Name(), calls));
    RunCollectiveData(op);
  } catch (const std::exception& e) {
    return s.FromGloo(op.Label(), e);
  }
  return absl::OkStatus();
}

// One Send or Recv of a unit in flight.
struct P2P {
  Op* op = nullptr;
  std::array<uint64_t, 2> mine{}, theirs{};
  std::unique_ptr<UB> mine_buf, theirs_buf, data_buf;
  bool data_posted = false;
  absl::Status status;
};

uint64_t DescSlot(uint64_t seq, int side) { return kDescPrefix | ((seq & kSeqMask) << 1) | side; }
uint64_t DataSlot(uint64_t seq) { return kDataPrefix | (seq & kSeqMask); }

// OK when the (count, dtype) a Send sent and its Recv expected agree; otherwise the mismatch naming both.
absl::Status CheckP2P(const Op& op, const std::array<uint64_t, 2>& sent,
                      const std::array<uint64_t, 2>& expected) {
  const bool is_send = op.args.kind == Kind::kSend;
  const int src = is_send ? op.st->rank : op.args.peer;
  const int dst = is_send ? op.args.peer : op.st->rank;
  const auto as_args = [](const std::array<uint64_t, 2>& d) {
    Args a;
    a.count = d[0];
    a.dtype = static_cast<DataType>(d[1]);
    return a;
  };
  return internal::CheckSameP2P(op.seq, op.st->Name(), src, dst, as_args(sent), as_args(expected));
}

// The stream work of one launch: the ops of one stream, as one unit (see the file comment).
absl::Status RunUnit(const std::vector<std::shared_ptr<Op>>& ops) {
  const int64_t start_ns = trace::Enabled() ? trace::NowNs() : 0;
  internal::NameStreamThread(ops.front()->st->trace_pid);
  std::shared_ptr<State> st = ops.front()->st;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    for (auto& op : ops) ++op->st->active;
  }
  std::vector<absl::Status> results(ops.size());
  std::vector<P2P> p2p;
  std::vector<size_t> p2p_index;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (IsCollective(ops[i]->args.kind)) continue;
    P2P x;
    x.op = ops[i].get();
    x.mine = {ops[i]->args.count, static_cast<uint64_t>(ops[i]->args.dtype)};
    p2p.push_back(std::move(x));
    p2p_index.push_back(i);
  }
  // 1. Post the descriptors of every Send/Recv to a peer (self pairs are matched locally below).
  for (P2P& x : p2p) {
    Op& op = *x.op;
    State& s = *op.st;
    if (op.args.peer == s.rank) continue;
    x.status = s.Broken(op.Label());
    if (!x.status.ok()) continue;
    const bool is_send = op.args.kind == Kind::kSend;
    try {
      x.mine_buf = s.ctx->createUnboundBuffer(x.mine.data(), sizeof(x.mine));
      x.theirs_buf = s.ctx->createUnboundBuffer(x.theirs.data(), sizeof(x.theirs));
      x.mine_buf->send(op.args.peer, DescSlot(op.seq, is_send ? 0 : 1));
      x.theirs_buf->recv(op.args.peer, DescSlot(op.seq, is_send ? 1 : 0));
    } catch (const std::exception& e) {
      x.status = s.FromGloo(op.Label(), e);
    }
  }
  // 2. Collectives, in call order.
  for (size_t i = 0; i < ops.size(); ++i) {
    if (IsCollective(ops[i]->args.kind)) results[i] = RunCollective(*ops[i]);
  }
  // 3. Check the descriptors, then post the payloads; self sends meet self receives in order.
  std::vector<P2P*> self_sends, self_recvs;
  for (P2P& x : p2p) {
    Op& op = *x.op;
    State& s = *op.st;
    if (op.args.peer == s.rank) {
      (op.args.kind == Kind::kSend ? self_sends : self_recvs).push_back(&x);
      continue;
    }
    if (!x.status.ok()) continue;
    const bool is_send = op.args.kind == Kind::kSend;
    try {
      x.theirs_buf->waitRecv(s.timeout);
      x.mine_buf->waitSend(s.timeout);
      x.status = is_send ? CheckP2P(op, x.mine, x.theirs) : CheckP2P(op, x.theirs, x.mine);
      if (!x.status.ok()) continue;
      if (op.args.count == 0) continue;
      const size_t bytes = op.args.count * SizeOf(op.args.dtype);
      if (is_send) {
        x.data_buf = s.ctx->createUnboundBuffer(const_cast<void*>(op.args.send), bytes);
        x.data_buf->send(op.args.peer, DataSlot(op.seq));
      } else {
        x.data_buf = s.ctx->createUnboundBuffer(op.args.recv, bytes);
        x.data_buf->recv(op.args.peer, DataSlot(op.seq));
      }
      x.data_posted = true;
    } catch (const std::exception& e) {
      x.status = s.FromGloo(op.Label(), e);
    }
  }
  for (size_t k = 0; k < std::max(self_sends.size(), self_recvs.size()); ++k) {
    if (k >= self_sends.size() || k >= self_recvs.size()) {
      P2P& x = k < self_sends.size() ? *self_sends[k] : *self_recvs[k];
      x.status =
          absl::InvalidArgumentError(absl::StrCat(x.op->Label(), ": a ", KindName(x.op->args.kind),
                                                  " to/from itself needs its match in the same group"));
      continue;
    }
    P2P& s = *self_sends[k];
    P2P& v = *self_recvs[k];
    s.status = v.status = s.op->st->Broken(s.op->Label());
    if (!s.status.ok()) continue;
    s.status = v.status = CheckP2P(*s.op, s.mine, v.mine);
    if (!s.status.ok()) continue;
    std::memcpy(v.op->args.recv, s.op->args.send, s.op->args.count * SizeOf(s.op->args.dtype));
  }
  // 4. Await the payloads: receives first, then sends.
  for (int pass = 0; pass < 2; ++pass) {
    for (P2P& x : p2p) {
      const bool is_send = x.op->args.kind == Kind::kSend;
      if (!x.data_posted || !x.status.ok() || is_send != (pass == 1)) continue;
      try {
        if (is_send) {
          x.data_buf->waitSend(x.op->st->timeout);
        } else {
          x.data_buf->waitRecv(x.op->st->timeout);
        }
      } catch (const std::exception& e) {
        x.status = x.op->st->FromGloo(x.op->Label(), e);
      }
    }
  }
  for (size_t j = 0; j < p2p.size(); ++j) results[p2p_index[j]] = p2p[j].status;
  p2p.clear();  // buffers go before the unit reports completion
  // The unit completes as a whole: each op's stream event ends here.
  for (size_t i = 0; i < ops.size(); ++i) {
    internal::TraceCall("comm.stream", ops[i]->args, ops[i]->Who(), ops[i]->seq, start_ns, results[i],
                        ops.size() > 1);
  }
  absl::Status first;
  for (size_t i = 0; i < ops.size(); ++i) {
    State& s = *ops[i]->st;
    std::lock_guard<std::mutex> lock(s.mu);
    if (!results[i].ok()) {
      if (s.work_error.ok()) s.work_error = Fresh(results[i]);
      if (first.ok()) first = results[i];
    }
    --s.pending;
    --s.active;
    s.cv.notify_all();
  }
  return first;
}

// Launching only queues the work: the call does not wait for its peers (comm.h), so the launch event is
// short.
absl::Status Launch(const std::vector<std::shared_ptr<Op>>& ops, bool grouped) {
  const int64_t start_ns = trace::Enabled() ? trace::NowNs() : 0;
  std::vector<std::pair<Stream*, std::vector<std::shared_ptr<Op>>>> units;
  for (auto& op : ops) {
    {
      std::lock_guard<std::mutex> lock(op->st->mu);
      if (op->st->life != Life::kLive) {
        absl::Status gone = absl::FailedPreconditionError(
            absl::StrCat(op->Label(), ": rank ", op->st->rank, " already destroyed or aborted it"));
        internal::TraceCall("comm", op->args, op->Who(), op->seq, start_ns, gone, grouped);
        return gone;
      }
      ++op->st->pending;
      internal::CountCall(op->args, op->st->n, op->st->stats);
    }
    auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.first == op->stream; });
    if (it == units.end()) {
      units.emplace_back(op->stream, std::vector<std::shared_ptr<Op>>{});
      it = units.end() - 1;
    }
    it->second.push_back(op);
  }
  for (auto& [stream, unit] : units) {
    stream->Enqueue([unit = std::move(unit)] { return RunUnit(unit); });
  }
  for (auto& op : ops)
    internal::TraceCall("comm", op->args, op->Who(), op->seq, start_ns, absl::OkStatus(), grouped);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Comm>> Join(int nranks, int rank, std::shared_ptr<comm::Store> store,
                                           const std::string& prefix, const std::string& host,
                                           const CommOptions& options, std::function<void()> on_release);

class GlooComm final : public internal::HostComm {
 public:
  explicit GlooComm(std::shared_ptr<State> st) : st_(std::move(st)) {}
  ~GlooComm() override {
    if (!released()) (void)Destroy();
  }

  int rank() const override { return st_->rank; }
  int size() const override { return st_->n; }
  Backend backend() const override { return Backend::kGloo; }
  const CommOptions& options() const override { return st_->options; }

  absl::Status Destroy() override {
    std::unique_lock<std::mutex> lock(st_->mu);
    RETURN_IF_ERROR(UsableLocked("Destroy"));
    st_->cv.wait(lock, [&] { return st_->pending == 0 || st_->life != Life::kLive; });
    if (st_->life == Life::kAborted) {
      return absl::AbortedError(Where("Destroy") + ": aborted while Destroy waited for pending work");
    }
    st_->life = Life::kDestroyed;
    st_->closing = true;
    const bool healthy = st_->broken.ok();
    absl::Status result = Fresh(st_->work_error);
    lock.unlock();
    if (healthy) Notify(kBye);
    Release();
    return result;
  }

  absl::Status Abort() override {
    std::unique_lock<std::mutex> lock(st_->mu);
    RETURN_IF_ERROR(UsableLocked("Abort"));
    st_->life = Life::kAborted;
    st_->closing = true;
    const std::string why = absl::StrCat("rank ", st_->rank, " aborted comm '", st_->Name(), "'");
    if (st_->broken.ok()) st_->broken = absl::AbortedError(why);
    st_->cv.notify_all();
    lock.unlock();
    Notify(kAbortMsg);  // peers learn who aborted (best effort: a broken connection is skipped)
    st_->FailPairs();   // wakes this rank's blocked work; its connections close
    lock.lock();
    st_->cv.wait(lock, [&] { return st_->active == 0; });  // nobody touches user buffers any more
    lock.unlock();
    Release();
    return absl::OkStatus();
  }

  absl::Status GetAsyncError() override {
    std::lock_guard<std::mutex> lock(st_->mu);
    RETURN_IF_ERROR(UsableLocked("GetAsyncError"));
    return Fresh(st_->broken);
  }

  bool released() const override {
    std::lock_guard<std::mutex> lock(st_->mu);
    return st_->life != Life::kLive;
  }

  absl::StatusOr<std::unique_ptr<Comm>> Split(int color, int key) override {
    if (internal::InGroup()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Split on comm '", st_->Name(), "': not allowed between GroupStart and GroupEnd"));
    }
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(st_->mu);
      RETURN_IF_ERROR(UsableLocked("Split"));
      seq = st_->seq.next_coll++;
    }
    const std::string where = absl::StrCat("Split #", seq + 1, " on comm '", st_->Name(), "'");
    RETURN_IF_ERROR(st_->Broken(where));
    // Every rank's (color, key), then the members of this color ordered by (key, old rank).
    std::vector<int64_t> all;
    try {
      all = AllGatherSmall(*st_, {static_cast<int64_t>(Kind::kSplit), color, key},
                           static_cast<uint32_t>(seq * 2));
    } catch (const std::exception& e) {
      return st_->FromGloo(where, e);
    }
    for (int p = 0; p < st_->n; ++p) {
      if (all[p * 3] != static_cast<int64_t>(Kind::kSplit)) {
        return absl::InvalidArgumentError(
            absl::StrCat("collective #", seq + 1, " mismatch on comm '", st_->Name(), "': rank ", st_->rank,
                         " called Split, rank ", p, " called another collective"));
      }
    }
    absl::StatusOr<std::unique_ptr<Comm>> child = std::unique_ptr<Comm>();
    if (color >= 0) {
      std::vector<std::pair<int64_t, int>> members;
      for (int p = 0; p < st_->n; ++p) {
        if (all[p * 3 + 1] == color) members.emplace_back(all[p * 3 + 2], p);
      }
      std::sort(members.begin(), members.end());
      int new_rank = 0;
      while (members[new_rank].second != st_->rank) ++new_rank;
      CommOptions options = st_->options;
      options.name = absl::StrCat(st_->Name(), ".", color);
      child = Join(static_cast<int>(members.size()), new_rank, st_->store,
                   absl::StrCat(st_->prefix, "/split", seq, "/", color), st_->host, options, nullptr);
      if (child.ok()) static_cast<GlooComm&>(**child).st_->trace_pid = st_->trace_pid;
    }
    // Everyone waits until every child is connected: rank 0 (which may serve the store) must not leave early.
    try {
      AllGatherSmall(*st_, {0}, static_cast<uint32_t>(seq * 2 + 1));
    } catch (const std::exception& e) {
      return st_->FromGloo(where, e);
    }
    return child;
  }

  Stats stats() const override {
    std::lock_guard<std::mutex> lock(st_->mu);
    return st_->stats;
  }
  void ResetStats() override {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->stats = Stats();
  }

 private:
  std::string Where(const char* what) const {
    return absl::StrCat(what, " on comm '", st_->Name(), "' (rank ", st_->rank, ")");
  }

  absl::Status UsableLocked(const char* what) const {
    if (st_->life == Life::kDestroyed) {
      return absl::FailedPreconditionError(Where(what) + ": the communicator was destroyed");
    }
    if (st_->life == Life::kAborted) {
      return absl::FailedPreconditionError(Where(what) + ": the communicator was aborted");
    }
    return absl::OkStatus();
  }

  // Tells every peer's monitor that this rank leaves (bye) or aborts.
  void Notify(uint32_t code) {
    int lost;
    {
      std::lock_guard<std::mutex> lock(st_->mu);
      lost = st_->lost_rank;
    }
    st_->Tell(code, lost);
  }

  // Stops the monitors and closes the connections.
  void Release() {
    State& s = *st_;
    for (auto& b : s.mon_bufs) {
      if (b) {
        b->abortWaitRecv();
      }
    }
    for (auto& t : s.monitors) t.join();
    s.monitors.clear();
    s.mon_bufs.clear();
    if (s.on_release) s.on_release();
  }

  absl::Status Validate(const Args& a) const {
    return internal::ValidateArgs(a, st_->rank, st_->n, Where(KindName(a.kind)));
  }

  absl::Status Call(const Args& a, Stream& stream) override {
    absl::Status status = [&]() -> absl::Status {
      std::lock_guard<std::mutex> lock(st_->mu);
      return UsableLocked(KindName(a.kind));
    }();
    if (status.ok()) status = Validate(a);
    if (!status.ok()) {
      if (internal::InGroup()) internal::RecordGroupError(status);
      return status;
    }
    auto op = std::make_shared<Op>();
    op->st = st_;
    op->stream = &stream;
    op->args = a;
    {
      std::lock_guard<std::mutex> lock(st_->mu);
      op->seq = st_->seq.Take(a);
    }
    if (internal::InGroup()) {
      internal::AddToGroup(std::make_unique<GroupedGlooOp>(std::move(op)));
      return absl::OkStatus();
    }
    return Launch({op}, /*grouped=*/false);
  }

  std::shared_ptr<State> st_;
};

// Gloo writes to its TCP connections without MSG_NOSIGNAL. When a peer process dies, a write to its
// connection raises SIGPIPE, whose default action kills this process before the write's EPIPE can be reported
// as "lost the connection to rank R". So a process that joins a gloo communicator ignores SIGPIPE, unless the
// program installed a handler of its own.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      ::sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

absl::StatusOr<std::unique_ptr<Comm>> Join(int nranks, int rank, std::shared_ptr<comm::Store> store,
                                           const std::string& prefix, const std::string& host,
                                           const CommOptions& options, std::function<void()> on_release) {
  if (nranks < 1)
    return absl::InvalidArgumentError(absl::StrCat("gloo backend: need at least 1 rank, got ", nranks));
  if (rank < 0 || rank >= nranks) {
    return absl::InvalidArgumentError(absl::StrCat("gloo backend: rank ", rank, " is out of range for ",
                                                   nranks, " ranks (RANK must be < WORLD_SIZE)"));
  }
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommOptions.timeout must be positive, got ", options.timeout.count(), " ms"));
  }
  IgnoreSigpipe();
  auto st = std::make_shared<State>();
  st->rank = rank;
  st->n = nranks;
  st->trace_pid = rank;
  st->options = options;
  if (st->options.name.empty()) st->options.name = "gloo";
  st->timeout = ScaledTimeout(options.timeout);
  st->store = std::move(store);
  st->prefix = prefix;
  st->host = host;
  st->on_release = std::move(on_release);
  st->seq = internal::SeqCounters(nranks);
  st->departed.assign(nranks, false);
  const std::string where =
      absl::StrCat("gloo init of comm '", st->Name(), "' (rank ", rank, " of ", nranks, ")");
  comm::Store& kv = *st->store;

  // 1. WORLD_SIZE agrees with rank 0's, and every rank arrives.
  RETURN_IF_ERROR(kv.Set(absl::StrCat(prefix, "/ws/", rank), std::to_string(nranks)));
  absl::StatusOr<std::string> ws0 = kv.Get(absl::StrCat(prefix, "/ws/0"), st->timeout);
  if (!ws0.ok()) {
    return absl::Status(ws0.status().code(),
                        absl::StrCat(where, ": rank 0 did not arrive within ", st->timeout.count(), " ms (",
                                     ws0.status().message(), ")"));
  }
  if (*ws0 != std::to_string(nranks)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": this rank was started with WORLD_SIZE=", nranks,
                                                   " but rank 0 with WORLD_SIZE=", *ws0,
                                                   "; every rank must be given the same WORLD_SIZE"));
  }
  std::vector<std::string> keys;
  for (int p = 0; p < nranks; ++p) keys.push_back(absl::StrCat(prefix, "/ws/", p));
  std::vector<bool> seen;
  absl::Status arrived = kv.Wait(keys, st->timeout, &seen);
  if (!arrived.ok()) {
    if (arrived.code() != absl::StatusCode::kDeadlineExceeded) return arrived;
    std::vector<int> here, missing;
    for (int p = 0; p < nranks; ++p) (seen[p] ? here : missing).push_back(p);
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": waited ", st->timeout.count(), " ms for all ", nranks,
                     " ranks to join through the ", kv.Describe(), "; joined: ", RankList(here),
                     "; missing: ", RankList(missing), " (were WORLD_SIZE=", nranks, " processes started?)"));
  }
  for (int p = 0; p < nranks; ++p) {
    absl::StatusOr<std::string> ws = kv.TryGet(keys[p]);
    if (ws.ok() && *ws != std::to_string(nranks)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": rank ", p, " was started with WORLD_SIZE=", *ws, ", this rank with ", nranks));
    }
  }

  // 2. Gloo's full mesh of TCP connections, through the same store.
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    ctx->setTimeout(st->timeout);
    GlooStoreAdapter adapter(kv, prefix + "/gloo/", st->timeout);
    ctx->connectFullMesh(adapter, device);
    st->ctx = ctx;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(where, ": Gloo could not connect the ranks (listening on ", host, "): ", e.what()));
  }

  // 3. Monitors, then a barrier: after it nobody needs the store for this communicator.
  st->mon_in.assign(nranks, {0, 0, 0});
  st->mon_bufs.resize(nranks);
  try {
    for (int p = 0; p < nranks; ++p) {
      if (p == rank) continue;
      st->mon_bufs[p] = st->ctx->createUnboundBuffer(st->mon_in[p].data(), sizeof(st->mon_in[p]));
      st->mon_bufs[p]->recv(p, kMonitorSlot);
    }
    for (int p = 0; p < nranks; ++p) {
      if (p != rank) st->monitors.emplace_back(Monitor, st, p);
    }
    AllGatherSmall(*st, {rank}, 0xfffffffeu);
  } catch (const std::exception& e) {
    auto comm = std::make_unique<GlooComm>(st);
    (void)comm->Abort();
    return absl::UnavailableError(absl::StrCat(where, ": the init barrier failed: ", e.what()));
  }
  return std::unique_ptr<Comm>(new GlooComm(std::move(st)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Comm>> InitWithStore(int nranks, int rank, std::shared_ptr<comm::Store> store,
                                                    const std::string& prefix, const std::string& host,
                                                    const CommOptions& options) {
  return Join(nranks, rank, std::move(store), prefix, host, options, nullptr);
}

absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank,
                                               const CommOptions& options) {
  // Ranks of one machine meet in a file store named after the id; rank 0 removes it when it leaves.
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/distlab-gloo-", id.value);
  ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store, FileStore::Create(dir));
  std::function<void()> cleanup;
  if (rank == 0) {
    cleanup = [dir] {
      if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
          const std::string name = e->d_name;
          if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
        }
        ::closedir(d);
      }
      ::rmdir(dir.c_str());
    };
  }
  CommOptions named = options;
  if (named.name.empty()) named.name = absl::StrCat("id", id.value % 1000000);
  return Join(nranks, rank, std::shared_ptr<comm::Store>(std::move(store)), "comm", "127.0.0.1", named,
              std::move(cleanup));
}

absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options) {
  const UniqueId id = GetUniqueId();
  std::vector<absl::StatusOr<std::unique_ptr<Comm>>> results;
  for (int r = 0; r < n; ++r) results.emplace_back(absl::UnknownError("not joined"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { results[r] = InitRank(n, id, r, options); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Comm>> comms;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    comms.push_back(std::move(*r));
  }
  return comms;
}

absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> grouped) {
  std::vector<std::shared_ptr<Op>> ops;
  for (auto& g : grouped) ops.push_back(static_cast<GroupedGlooOp&>(*g).op);
  return Launch(ops, /*grouped=*/true);
}

}  // namespace distlab::comm::gloo_backend
