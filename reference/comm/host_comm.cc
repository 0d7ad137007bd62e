#include "reference/comm/host_comm.h"

#include "absl/strings/str_cat.h"
#include "reference/comm/internal.h"
#include "reference/trace/trace.h"

namespace distlab::comm::internal {
namespace {

bool ValidDtype(DataType d) { return static_cast<unsigned>(d) <= static_cast<unsigned>(DataType::kU8); }
bool ValidOp(RedOp op) { return static_cast<unsigned>(op) <= static_cast<unsigned>(RedOp::kAvg); }

Args Make(Kind kind, const void* send, void* recv, size_t count, DataType dtype) {
  Args a;
  a.kind = kind, a.send = send, a.recv = recv, a.count = count, a.dtype = dtype;
  return a;
}

uint64_t PayloadBytes(const Args& a, int n) {
  const uint64_t bytes = a.count * SizeOf(a.dtype);
  switch (a.kind) {
    case Kind::kAllGather:
    case Kind::kReduceScatter:
    case Kind::kAllToAll:
      return bytes * n;  // S is the whole array
    default:
      return bytes;
  }
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce:
      return "AllReduce";
    case Kind::kBroadcast:
      return "Broadcast";
    case Kind::kReduce:
      return "Reduce";
    case Kind::kAllGather:
      return "AllGather";
    case Kind::kReduceScatter:
      return "ReduceScatter";
    case Kind::kAllToAll:
      return "AllToAll";
    case Kind::kSplit:
      return "Split";
    case Kind::kSend:
      return "Send";
    case Kind::kRecv:
      return "Recv";
  }
  return "?";
}

std::string Describe(const Args& a) {
  const std::string dtype(Name(a.dtype));
  const std::string op(Name(a.op));
  std::string s = absl::StrCat(KindName(a.kind), "(");
  switch (a.kind) {
    case Kind::kAllReduce:
    case Kind::kReduceScatter:
      absl::StrAppend(&s, "count=", a.count, ", ", dtype, ", ", op);
      break;
    case Kind::kReduce:
      absl::StrAppend(&s, "count=", a.count, ", ", dtype, ", ", op, ", root=", a.root);
      break;
    case Kind::kBroadcast:
      absl::StrAppend(&s, "count=", a.count, ", ", dtype, ", root=", a.root);
      break;
    case Kind::kAllGather:
    case Kind::kAllToAll:
      absl::StrAppend(&s, "count=", a.count, ", ", dtype);
      break;
    case Kind::kSplit:
      absl::StrAppend(&s, "color=", a.color, ", key=", a.key);
      break;
    case Kind::kSend:
    case Kind::kRecv:
      absl::StrAppend(&s, "count=", a.count, ", ", dtype, ", peer=", a.peer);
      break;
  }
  return s + ")";
}

bool SameCall(const Args& a, const Args& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kAllReduce:
    case Kind::kReduceScatter:
      return a.count == b.count && a.dtype == b.dtype && a.op == b.op;
    case Kind::kReduce:
      return a.count == b.count && a.dtype == b.dtype && a.op == b.op && a.root == b.root;
    case Kind::kBroadcast:
      return a.count == b.count && a.dtype == b.dtype && a.root == b.root;
    case Kind::kAllGather:
    case Kind::kAllToAll:
      return a.count == b.count && a.dtype == b.dtype;
    case Kind::kSplit:
    case Kind::kSend:
    case Kind::kRecv:
      break;
  }
  return true;
}

absl::Status CheckSameCollective(uint64_t seq, const std::string& comm_name, const std::vector<Args>& calls) {
  bool same = true;
  for (size_t p = 1; p < calls.size(); ++p) same = same && SameCall(calls[0], calls[p]);
  if (same) return absl::OkStatus();
  std::string msg = absl::StrCat("collective #", seq + 1, " mismatch on comm '", comm_name, "': ");
  for (size_t p = 0; p < calls.size(); ++p) {
    absl::StrAppend(&msg, p ? ", " : "", "rank ", p, " called ", Describe(calls[p]));
  }
  return absl::InvalidArgumentError(msg);
}

absl::Status CheckSameP2P(uint64_t seq, const std::string& comm_name, int src, int dst, const Args& send,
                          const Args& recv) {
  const bool counts = send.count != recv.count;
  const bool dtypes = send.dtype != recv.dtype;
  if (!counts && !dtypes) return absl::OkStatus();
  const char* what = counts ? (dtypes ? "counts and dtypes" : "counts") : "dtypes";
  return absl::InvalidArgumentError(
      absl::StrCat("Send/Recv #", seq + 1, " on comm '", comm_name, "': rank ", src, " sent ", send.count,
                   " ", std::string(Name(send.dtype)), " to rank ", dst, ", which expected ", recv.count, " ",
                   std::string(Name(recv.dtype)), ": ", what, " must match in Send/Recv"));
}

std::string RankList(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) absl::StrAppend(&s, i ? ", " : "", ranks[i]);
  return s;
}

bool Overlap(const void* a, size_t abytes, const void* b, size_t bbytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return abytes > 0 && bbytes > 0 && x < y + bbytes && y < x + abytes;
}

absl::Status ValidateArgs(const Args& a, int r, int n, const std::string& where) {
  if (!ValidDtype(a.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": invalid dtype ", static_cast<int>(a.dtype)));
  }
  const bool reduces =
      a.kind == Kind::kAllReduce || a.kind == Kind::kReduce || a.kind == Kind::kReduceScatter;
  if (reduces && !ValidOp(a.op)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": invalid reduction op ", static_cast<int>(a.op)));
  }
  if ((a.kind == Kind::kBroadcast || a.kind == Kind::kReduce) && (a.root < 0 || a.root >= n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": root ", a.root, " is out of range for ", n, " ranks"));
  }
  if (a.kind == Kind::kSend || a.kind == Kind::kRecv) {
    if (a.peer < 0 || a.peer >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": peer ", a.peer, " is out of range for ", n, " ranks"));
    }
    if (a.peer == r && !InGroup()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": a ", KindName(a.kind), " to/from itself outside a group would wait forever for its own ",
          a.kind == Kind::kSend ? "Recv" : "Send", "; put both between GroupStart and GroupEnd"));
    }
  }
  if (a.count == 0) return absl::OkStatus();
  const size_t elem = SizeOf(a.dtype);
  size_t send_bytes = a.count * elem;
  size_t recv_bytes = a.count * elem;
  bool need_send = true;
  bool need_recv = true;
  switch (a.kind) {
    case Kind::kBroadcast:
      need_send = r == a.root;
      break;
    case Kind::kReduce:
      need_recv = r == a.root;
      break;
    case Kind::kAllGather:
      recv_bytes *= n;
      break;
    case Kind::kReduceScatter:
      send_bytes *= n;
      break;
    case Kind::kAllToAll:
      send_bytes *= n, recv_bytes *= n;
      break;
    case Kind::kSend:
      need_recv = false;
      break;
    case Kind::kRecv:
      need_send = false;
      break;
    default:
      break;
  }
  if (need_send && a.send == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", a.kind == Kind::kSend ? "buffer" : "send buffer", " is null with count ", a.count));
  }
  if (need_recv && a.recv == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", a.kind == Kind::kRecv ? "buffer" : "recv buffer", " is null with count ", a.count));
  }
  if (!need_send || !need_recv) return absl::OkStatus();
  // Aliasing: exactly in place (this rank's slice of the larger buffer is the smaller one) or disjoint.
  const void* in_place = a.recv;
  if (a.kind == Kind::kAllGather) in_place = At(a.recv, r * a.count * elem);
  if (a.kind == Kind::kReduceScatter) in_place = At(a.send, r * a.count * elem);
  const bool exact = a.kind == Kind::kReduceScatter ? a.recv == in_place : a.send == in_place;
  if (a.kind == Kind::kAllToAll && Overlap(a.send, send_bytes, a.recv, recv_bytes)) {
    return absl::InvalidArgumentError(where +
                                      ": send and recv buffers overlap (AllToAll cannot run in place)");
  }
  if (!exact && Overlap(a.send, send_bytes, a.recv, recv_bytes)) {
    return absl::InvalidArgumentError(
        where + ": send and recv buffers overlap without being in place as NCCL defines it");
  }
  return absl::OkStatus();
}

void TraceCall(const char* category, const Args& a, const TraceWho& who, uint64_t seq, int64_t start_ns,
               const absl::Status& status, bool grouped) {
  if (!trace::Enabled()) return;
  const int64_t end_ns = trace::NowNs();
  trace::Args t;
  t.Add("op", KindName(a.kind));
  if (a.kind != Kind::kSplit) {
    t.Add("dtype", Name(a.dtype))
        .Add("count", static_cast<uint64_t>(a.count))
        .Add("bytes", PayloadBytes(a, who.nranks));
  }
  if (a.kind == Kind::kAllReduce || a.kind == Kind::kReduce || a.kind == Kind::kReduceScatter) {
    t.Add("redop", Name(a.op));
  }
  if (a.kind == Kind::kBroadcast || a.kind == Kind::kReduce) t.Add("root", a.root);
  if (a.kind == Kind::kSend || a.kind == Kind::kRecv) t.Add("peer", a.peer);
  if (a.kind == Kind::kSplit) t.Add("color", a.color).Add("key", a.key);
  t.Add("seq", seq + 1);
  if (who.comm != nullptr) t.Add("comm", *who.comm);
  t.Add("rank", who.rank).Add("nranks", who.nranks).Add("grouped", grouped ? 1 : 0);
  t.Add("status", status.ok() ? std::string("OK") : status.ToString());
  trace::Complete(KindName(a.kind), category, who.pid, start_ns, end_ns, t);
}

void NameStreamThread(int pid) {
  thread_local int named_for = -1;
  if (!trace::Enabled() || named_for == pid) return;
  named_for = pid;
  trace::SetThreadName(absl::StrCat("rank ", pid, " stream"));
}

void CountCall(const Args& a, int n, Stats& stats) {
  const uint64_t bytes = PayloadBytes(a, n);
  if (a.kind == Kind::kSend) {
    ++stats.sends;
    stats.bytes_sent += bytes;
  } else if (a.kind == Kind::kRecv) {
    ++stats.recvs;
    stats.bytes_received += bytes;
  } else {
    ++stats.collective_calls;
    stats.collective_bytes += bytes;
    Stats::Kind* k = nullptr;
    switch (a.kind) {
      case Kind::kAllReduce:
        k = &stats.all_reduce;
        break;
      case Kind::kBroadcast:
        k = &stats.broadcast;
        break;
      case Kind::kReduce:
        k = &stats.reduce;
        break;
      case Kind::kAllGather:
        k = &stats.all_gather;
        break;
      case Kind::kReduceScatter:
        k = &stats.reduce_scatter;
        break;
      case Kind::kAllToAll:
        k = &stats.all_to_all;
        break;
      default:
        break;
    }
    if (k != nullptr) ++k->calls, k->bytes += bytes;
  }
}

absl::Status HostComm::AllReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                 Stream& stream) {
  Args a = Make(Kind::kAllReduce, send, recv, count, dtype);
  a.op = op;
  return Call(a, stream);
}

absl::Status HostComm::Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                 Stream& stream) {
  Args a = Make(Kind::kBroadcast, send, recv, count, dtype);
  a.root = root;
  return Call(a, stream);
}

absl::Status HostComm::Reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                              Stream& stream) {
  Args a = Make(Kind::kReduce, send, recv, count, dtype);
  a.op = op, a.root = root;
  return Call(a, stream);
}

absl::Status HostComm::AllGather(const void* send, void* recv, size_t count, DataType dtype, Stream& stream) {
  return Call(Make(Kind::kAllGather, send, recv, count, dtype), stream);
}

absl::Status HostComm::ReduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                     Stream& stream) {
  Args a = Make(Kind::kReduceScatter, send, recv, count, dtype);
  a.op = op;
  return Call(a, stream);
}

absl::Status HostComm::AllToAll(const void* send, void* recv, size_t count, DataType dtype, Stream& stream) {
  return Call(Make(Kind::kAllToAll, send, recv, count, dtype), stream);
}

absl::Status HostComm::Send(const void* buf, size_t count, DataType dtype, int peer, Stream& stream) {
  Args a = Make(Kind::kSend, buf, nullptr, count, dtype);
  a.peer = peer;
  return Call(a, stream);
}

absl::Status HostComm::Recv(void* buf, size_t count, DataType dtype, int peer, Stream& stream) {
  Args a = Make(Kind::kRecv, nullptr, buf, count, dtype);
  a.peer = peer;
  return Call(a, stream);
}

}  // namespace distlab::comm::internal
