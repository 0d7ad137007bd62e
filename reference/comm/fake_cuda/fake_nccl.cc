// A simulated NCCL for machines without GPUs: the NCCL functions the nccl backend loads (reference/comm/
// cuda_dl.h), on host memory, so the backend's own logic -- argument checks, host staging, groups, copies
// back, Split, the lifecycle -- and the labs' use of it run in CI. It proves nothing about real GPUs or real
// NCCL: every call works on plain memory and finishes before it returns (streams are ignored).
//
// Semantics: the k-th collective of each rank of a communicator meets the k-th of the others; the last rank
// to arrive computes every rank's output (with the runtime's own reduction, comm::ReduceInto) and wakes the
// others. Send is eager (the payload is copied into the peer's mailbox at once); Recv waits for it. Between
// ncclGroupStart and ncclGroupEnd the calls are recorded and run at the outermost ncclGroupEnd: first every
// send and every collective contribution is posted, then every receive and collective is waited for, so one
// thread may drive several ranks as with NCCL. Abort wakes every waiter of the communicator's clique with
// ncclRemoteError (where NCCL would leave the peers hanging until their own timeout or abort). A wait longer
// than 120 s is a ncclInternalError naming the call (never a hang).
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "reference/comm/types.h"

namespace {

namespace dc = ::distlab::comm;

enum class Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kSplit };

struct Contribution {
  const void* send = nullptr;
  void* recv = nullptr;
  int color = 0, key = 0;         // Split
  ncclComm_t* newcomm = nullptr;  // Split
};

struct Op {
  Kind kind = Kind::kAllReduce;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  int arrived = 0;
  bool done = false;
  std::vector<Contribution> from;
};

struct Clique {
  explicit Clique(int n) : n(n), next_seq(n, 0) {}
  const int n;
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;
  std::vector<uint64_t> next_seq;  // per rank: its next collective's number
  std::map<uint64_t, Op> ops;      // by number
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail;  // (from, to) -> payloads, in order
};

}  // namespace

struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  bool aborted = false;
};

namespace {

thread_local std::string last_error;
thread_local int group_depth = 0;
thread_local std::vector<std::function<void()>> group_posts, group_waits;

ncclResult_t Fail(ncclResult_t r, std::string what) {
  last_error = std::move(what);
  return r;
}

bool ToDc(ncclDataType_t t, dc::DataType* out) {
  switch (t) {
    case ncclInt32:
      *out = dc::DataType::kI32;
      return true;
    case ncclInt64:
      *out = dc::DataType::kI64;
      return true;
    case ncclUint8:
      *out = dc::DataType::kU8;
      return true;
    case ncclFloat16:
      *out = dc::DataType::kF16;
      return true;
    case ncclFloat32:
      *out = dc::DataType::kF32;
      return true;
    case ncclFloat64:
      *out = dc::DataType::kF64;
      return true;
    case ncclBfloat16:
      *out = dc::DataType::kBF16;
      return true;
    default:
      return false;
  }
}

bool ToDc(ncclRedOp_t o, dc::RedOp* out) {
  switch (o) {
    case ncclSum:
      *out = dc::RedOp::kSum;
      return true;
    case ncclProd:
      *out = dc::RedOp::kProd;
      return true;
    case ncclMax:
      *out = dc::RedOp::kMax;
      return true;
    case ncclMin:
      *out = dc::RedOp::kMin;
      return true;
    case ncclAvg:
      *out = dc::RedOp::kAvg;
      return true;
    default:
      return false;
  }
}

// Every rank's output of a finished collective (called by the last rank to arrive, under the clique's lock).
void Compute(Clique& c, Op& op) {
  const int n = c.n;
  if (op.kind == Kind::kSplit) {
    std::map<int, std::vector<std::pair<int, int>>> groups;  // color -> (key, rank)
    for (int r = 0; r < n; ++r) {
      if (op.from[r].color != NCCL_SPLIT_NOCOLOR) groups[op.from[r].color].push_back({op.from[r].key, r});
    }
    for (int r = 0; r < n; ++r) *op.from[r].newcomm = nullptr;
    for (auto& [color, members] : groups) {
      std::sort(members.begin(), members.end());
      auto child = std::make_shared<Clique>(static_cast<int>(members.size()));
      for (size_t i = 0; i < members.size(); ++i) {
        *op.from[members[i].second].newcomm = new ncclComm{child, static_cast<int>(i), false};
      }
    }
    return;
  }
  dc::DataType dt{};
  dc::RedOp ro = dc::RedOp::kSum;
  ToDc(op.dtype, &dt);
  ToDc(op.op, &ro);
  const size_t elem = dc::SizeOf(dt), bytes = op.count * elem;
  auto reduce = [&](size_t offset) {  // op over ranks of send[offset .. offset + count)
    std::vector<char> acc(bytes);
    std::memcpy(acc.data(), static_cast<const char*>(op.from[0].send) + offset, bytes);
    for (int r = 1; r < n; ++r) {
      dc::ReduceInto(acc.data(), static_cast<const char*>(op.from[r].send) + offset, op.count, dt, ro);
    }
    dc::FinishReduce(acc.data(), op.count, dt, ro, n);
    return acc;
  };
  // Outputs are computed into temporaries first: a rank's output may be its (or its block of the) input.
  std::vector<std::vector<char>> out(n);
  switch (op.kind) {
    case Kind::kAllReduce: {
      const std::vector<char> acc = reduce(0);
      for (int r = 0; r < n; ++r) out[r] = acc;
      break;
    }
    case Kind::kReduce:
      out[op.root] = reduce(0);
      break;
    case Kind::kBroadcast: {
      const char* src = static_cast<const char*>(op.from[op.root].send);
      for (int r = 0; r < n; ++r) out[r].assign(src, src + bytes);
      break;
    }
    case Kind::kAllGather:
      for (int r = 0; r < n; ++r) {
        out[r].resize(bytes * n);
        for (int p = 0; p < n; ++p) std::memcpy(out[r].data() + p * bytes, op.from[p].send, bytes);
      }
      break;
    case Kind::kReduceScatter:
      for (int r = 0; r < n; ++r) out[r] = reduce(r * bytes);
      break;
    case Kind::kAllToAll:
      for (int r = 0; r < n; ++r) {
        out[r].resize(bytes * n);
        for (int p = 0; p < n; ++p) {
          std::memcpy(out[r].data() + p * bytes, static_cast<const char*>(op.from[p].send) + r * bytes,
                      bytes);
        }
      }
      break;
    case Kind::kSplit:
      break;
  }
  for (int r = 0; r < n; ++r) {
    if (!out[r].empty() && op.from[r].recv != nullptr)
      std::memcpy(op.from[r].recv, out[r].data(), out[r].size());
  }
}

// Posts this rank's part of its next collective; returns the number to wait for.
uint64_t Post(ncclComm_t comm, const Op& shape, const Contribution& mine) {
  Clique& c = *comm->clique;
  std::lock_guard<std::mutex> lock(c.mu);
  const uint64_t seq = c.next_seq[comm->rank]++;
  Op& op = c.ops[seq];
  if (op.from.empty()) {
    op = shape;
    op.from.assign(c.n, Contribution{});
  }
  op.from[comm->rank] = mine;
  if (++op.arrived == c.n) {
    Compute(c, op);
    op.done = true;
    c.cv.notify_all();
  }
  return seq;
}

ncclResult_t Wait(ncclComm_t comm, uint64_t seq, const char* what) {
  Clique& c = *comm->clique;
  std::unique_lock<std::mutex> lock(c.mu);
  const bool ok =
      c.cv.wait_for(lock, std::chrono::seconds(120), [&] { return c.aborted || c.ops[seq].done; });
  if (c.aborted) return Fail(ncclRemoteError, std::string(what) + ": the communicator was aborted");
  if (!ok)
    return Fail(ncclInternalError, std::string(what) + ": the other ranks did not arrive within 120 s");
  return ncclSuccess;
}

ncclResult_t Collective(ncclComm_t comm, Kind kind, const void* send, void* recv, size_t count,
                        ncclDataType_t dtype, ncclRedOp_t redop, int root, const char* what) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, std::string(what) + ": null communicator");
  dc::DataType dt{};
  dc::RedOp ro{};
  if (!ToDc(dtype, &dt)) return Fail(ncclInvalidArgument, std::string(what) + ": unsupported dtype");
  if ((kind == Kind::kAllReduce || kind == Kind::kReduce || kind == Kind::kReduceScatter) &&
      !ToDc(redop, &ro)) {
    return Fail(ncclInvalidArgument, std::string(what) + ": unsupported reduction op");
  }
  Op shape;
  shape.kind = kind;
  shape.count = count;
  shape.dtype = dtype;
  shape.op = redop;
  shape.root = root;
  Contribution mine;
  mine.send = send;
  mine.recv = recv;
  auto seq = std::make_shared<uint64_t>(0);
  auto post = [comm, shape, mine, seq] { *seq = Post(comm, shape, mine); };
  auto wait = [comm, seq, what] { (void)Wait(comm, *seq, what); };
  if (group_depth > 0) {
    group_posts.push_back(post);
    group_waits.push_back(wait);
    return ncclSuccess;
  }
  post();
  return Wait(comm, *seq, what);
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error (simulated NCCL)";
    case ncclInvalidArgument:
      return "invalid argument (simulated NCCL)";
    case ncclInvalidUsage:
      return "invalid usage (simulated NCCL)";
    case ncclRemoteError:
      return "remote process exited or there was a network error (simulated NCCL)";
    default:
      return "internal error (simulated NCCL)";
  }
}

const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = 0; i < sizeof(id->internal); i += 8) {
    const uint64_t v = rng();
    std::memcpy(id->internal + i, &v, std::min<size_t>(8, sizeof(id->internal) - i));
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  if (ndev < 1) return Fail(ncclInvalidArgument, "ncclCommInitAll: ndev < 1");
  auto clique = std::make_shared<Clique>(ndev);
  for (int r = 0; r < ndev; ++r) comms[r] = new ncclComm{clique, r, false};
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t*) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::shared_ptr<Clique>, int>> pending;  // id -> (clique, joined)
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return Fail(ncclInvalidArgument, "ncclCommInitRankConfig: bad rank");
  std::lock_guard<std::mutex> lock(mu);
  const std::string key(id.internal, sizeof(id.internal));
  auto& entry = pending[key];
  if (!entry.first) entry.first = std::make_shared<Clique>(nranks);
  *comm = new ncclComm{entry.first, rank, false};
  if (++entry.second == nranks) pending.erase(key);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  if (comm == nullptr || newcomm == nullptr) return Fail(ncclInvalidArgument, "ncclCommSplit: null argument");
  Op shape;
  shape.kind = Kind::kSplit;
  Contribution mine;
  mine.color = color;
  mine.key = key;
  mine.newcomm = newcomm;
  return Wait(comm, Post(comm, shape, mine), "ncclCommSplit");
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->clique->n;
  return ncclSuccess;
}

// As with NCCL, a peer's abort is not this communicator's error (its waits fail instead: see Wait).
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* async) {
  *async = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(comm->clique->mu);
    comm->clique->aborted = true;
  }
  comm->clique->cv.notify_all();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return Fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return ncclSuccess;
  std::vector<std::function<void()>> posts, waits;
  posts.swap(group_posts);
  waits.swap(group_waits);
  for (auto& p : posts) p();
  for (auto& w : waits) w();
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  return Collective(comm, Kind::kAllReduce, send, recv, count, dtype, op, 0, "ncclAllReduce");
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dtype, int root,
                           ncclComm_t comm, cudaStream_t) {
  return Collective(comm, Kind::kBroadcast, send, recv, count, dtype, ncclSum, root, "ncclBroadcast");
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t) {
  return Collective(comm, Kind::kReduce, send, recv, count, dtype, op, root, "ncclReduce");
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t dtype, ncclComm_t comm,
                           cudaStream_t) {
  return Collective(comm, Kind::kAllGather, send, recv, count, dtype, ncclSum, 0, "ncclAllGather");
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  return Collective(comm, Kind::kReduceScatter, send, recv, count, dtype, op, 0, "ncclReduceScatter");
}

ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t dtype, ncclComm_t comm,
                          cudaStream_t) {
  return Collective(comm, Kind::kAllToAll, send, recv, count, dtype, ncclSum, 0, "ncclAlltoAll");
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
                      cudaStream_t) {
  dc::DataType dt{};
  if (!ToDc(dtype, &dt)) return Fail(ncclInvalidArgument, "ncclSend: unsupported dtype");
  const size_t bytes = count * dc::SizeOf(dt);
  std::shared_ptr<Clique> c = comm->clique;
  const int from = comm->rank;
  auto post = [c, from, peer, buf, bytes] {  // eager: the payload is copied now
    std::lock_guard<std::mutex> lock(c->mu);
    const char* p = static_cast<const char*>(buf);
    c->mail[{from, peer}].emplace_back(p, p + bytes);
    c->cv.notify_all();
  };
  if (group_depth > 0) {
    group_posts.push_back(post);
    return ncclSuccess;
  }
  post();
  return ncclSuccess;
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
                      cudaStream_t) {
  dc::DataType dt{};
  if (!ToDc(dtype, &dt)) return Fail(ncclInvalidArgument, "ncclRecv: unsupported dtype");
  const size_t bytes = count * dc::SizeOf(dt);
  std::shared_ptr<Clique> c = comm->clique;
  const int to = comm->rank;
  auto result = std::make_shared<ncclResult_t>(ncclSuccess);
  auto wait = [c, to, peer, buf, bytes, result] {
    std::unique_lock<std::mutex> lock(c->mu);
    auto& box = c->mail[{peer, to}];
    if (!c->cv.wait_for(lock, std::chrono::seconds(120), [&] { return c->aborted || !box.empty(); })) {
      *result = Fail(ncclInternalError, "ncclRecv: nothing arrived within 120 s");
      return;
    }
    if (c->aborted) {
      *result = Fail(ncclRemoteError, "ncclRecv: the communicator was aborted");
      return;
    }
    std::vector<char> payload = std::move(box.front());
    box.pop_front();
    std::memcpy(buf, payload.data(), std::min(bytes, payload.size()));
  };
  if (group_depth > 0) {
    group_waits.push_back(wait);
    return ncclSuccess;
  }
  wait();
  return *result;
}

}  // extern "C"
