// One rank of the multi-process tests (multiprocess_test.cc), started with the launcher's environment
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DISTLAB_BACKEND=gloo). Usage: mp_worker SCENARIO [ARG]
//
//   check        every collective, Send/Recv (grouped ring, self pair) and Split on this rank's communicator,
//                compared bit for bit with the threads backend run in this process on every rank's inputs
//                (integer dtypes, every op, in and out of place, several counts and roots)
//   kill V       one AllReduce, then rank V kills itself (SIGKILL); the others' next AllReduce must fail
//                with a message naming rank V within 5 s
//   abort V      rank V calls Abort while the others wait in an AllReduce; they must fail naming rank V
//   init         CommInitFromEnv only; prints "init ok" or "init error: <status>" (exit 0 / 2)
//   fail V       rank V exits with status 3 after 100 ms; the others sleep 60 s (the launcher must end them)
//   env          prints RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT
// Exit status 0 when the scenario's expectation holds, 1 otherwise (with a line saying why).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/comm/comm.h"

namespace distlab::comm {
namespace {

using Clock = std::chrono::steady_clock;

int g_rank = -1;

void Say(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

// Deterministic inputs of (rank, case, element): every process can rebuild any rank's buffer.
uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

std::vector<char> Input(int rank, int kase, size_t elems, DataType dtype) {
  std::vector<char> buf(elems * SizeOf(dtype));
  for (size_t i = 0; i < buf.size(); ++i) {
    // Small values for prod so products do not all wrap to zero; any bytes otherwise.
    uint64_t v = Mix(static_cast<uint64_t>(rank) * 1000003u + static_cast<uint64_t>(kase) * 7919u + i);
    buf[i] = static_cast<char>(v & 0xff);
  }
  return buf;
}

enum class Coll { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll };
const char* CollName(Coll c) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllToAll"};
  return names[static_cast<int>(c)];
}

struct Case {
  Coll coll;
  DataType dtype;
  RedOp op;
  size_t count;
  int root;
  bool in_place;
};

// Elements of the send and recv buffers of a case on n ranks.
size_t SendElems(const Case& c, int n) {
  return c.coll == Coll::kReduceScatter || c.coll == Coll::kAllToAll ? c.count * n : c.count;
}
size_t RecvElems(const Case& c, int n) {
  return c.coll == Coll::kAllGather || c.coll == Coll::kAllToAll ? c.count * n : c.count;
}

// Runs case c on rank r of `comm` with its inputs; returns the recv buffer (or the error).
absl::Status RunCase(const Case& c, int kase, Comm& comm, Stream& stream, std::vector<char>* out) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t elem = SizeOf(c.dtype);
  std::vector<char> send = Input(r, kase, SendElems(c, n), c.dtype);
  std::vector<char> recv(RecvElems(c, n) * elem, 0x5a);
  const void* s = send.data();
  void* v = recv.data();
  if (c.in_place) {
    // The in-place layouts of NCCL: recv holds the input where the collective reads it.
    switch (c.coll) {
      case Coll::kAllGather:
        std::memcpy(recv.data() + r * c.count * elem, send.data(), c.count * elem);
        s = recv.data() + r * c.count * elem;
        break;
      case Coll::kReduceScatter:
        recv = send;
        s = recv.data();
        v = recv.data() + r * c.count * elem;
        break;
      default:
        recv = send;
        s = v = recv.data();
        break;
    }
  }
  absl::Status st;
  switch (c.coll) {
    case Coll::kAllReduce:
      st = comm.AllReduce(s, v, c.count, c.dtype, c.op, stream);
      break;
    case Coll::kBroadcast:
      st = comm.Broadcast(s, v, c.count, c.dtype, c.root, stream);
      break;
    case Coll::kReduce:
      st = comm.Reduce(s, v, c.count, c.dtype, c.op, c.root, stream);
      break;
    case Coll::kAllGather:
      st = comm.AllGather(s, v, c.count, c.dtype, stream);
      break;
    case Coll::kReduceScatter:
      st = comm.ReduceScatter(s, v, c.count, c.dtype, c.op, stream);
      break;
    case Coll::kAllToAll:
      st = comm.AllToAll(s, v, c.count, c.dtype, stream);
      break;
  }
  if (st.ok()) st = stream.Synchronize();
  if (!st.ok()) return st;
  if (c.in_place && c.coll == Coll::kReduceScatter) {
    *out = std::vector<char>(static_cast<char*>(v), static_cast<char*>(v) + c.count * elem);
  } else if (c.coll == Coll::kReduce && r != c.root) {
    out->clear();  // only the root's output is defined
  } else {
    *out = recv;
  }
  return absl::OkStatus();
}

std::vector<Case> Cases(int n) {
  std::vector<Case> cases;
  const DataType ints[] = {DataType::kI32, DataType::kI64, DataType::kU8};
  const size_t counts[] = {1, 37, 4099};
  for (DataType d : ints) {
    for (RedOp op : kAllRedOps) {
      for (size_t count : counts) {
        for (bool in_place : {false, true}) {
          cases.push_back({Coll::kAllReduce, d, op, count, 0, in_place});
          cases.push_back({Coll::kReduceScatter, d, op, count, 0, in_place});
          cases.push_back({Coll::kReduce, d, op, count, static_cast<int>(count % n), in_place});
        }
      }
    }
    for (size_t count : counts) {
      for (bool in_place : {false, true}) {
        for (int root = 0; root < n; ++root)
          cases.push_back({Coll::kBroadcast, d, RedOp::kSum, count, root, in_place});
        cases.push_back({Coll::kAllGather, d, RedOp::kSum, count, 0, in_place});
      }
      cases.push_back({Coll::kAllToAll, d, RedOp::kSum, count, 0, false});
    }
  }
  // One large all-reduce: Gloo splits it into segments.
  cases.push_back({Coll::kAllReduce, DataType::kI32, RedOp::kSum, size_t{3} << 20, 0, false});
  return cases;
}

int Check(Comm& comm) {
  const int n = comm.size();
  const int r = comm.rank();
  const std::vector<Case> cases = Cases(n);
  // The reference: the same cases on n threads of this process (threads backend).
  std::vector<std::vector<char>> expected(cases.size());
  absl::Status ref = FirstError(RunRanks(n, [&](int rank, Comm& c, Stream& s) -> absl::Status {
    for (size_t k = 0; k < cases.size(); ++k) {
      std::vector<char> out;
      absl::Status st = RunCase(cases[k], static_cast<int>(k), c, s, &out);
      if (!st.ok()) return st;
      if (rank == r) expected[k] = std::move(out);
    }
    return absl::OkStatus();
  }));
  if (!ref.ok()) {
    Say(absl::StrCat("rank ", r, ": the threads reference failed: ", ref.ToString()));
    return 1;
  }
  Stream stream;
  int failures = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::vector<char> out;
    absl::Status st = RunCase(c, static_cast<int>(k), comm, stream, &out);
    if (!st.ok() || out != expected[k]) {
      if (++failures <= 5) {
        Say(absl::StrCat("rank ", r, ": MISMATCH case ", k, " ", CollName(c.coll), " ",
                         std::string(Name(c.dtype)), " ", std::string(Name(c.op)), " count=", c.count,
                         " root=", c.root, c.in_place ? " in place" : " out of place",
                         st.ok() ? "" : " error: " + st.ToString()));
      }
    }
  }
  // A ring step in a group: send to next, receive from prev; plus a self pair in the same group.
  std::vector<int64_t> mine(1000), got(1000, -1), self_got(10, -1), self_sent(10);
  for (int i = 0; i < 1000; ++i) mine[i] = r * 100000 + i;
  for (int i = 0; i < 10; ++i) self_sent[i] = -r - i;
  absl::Status st = GroupStart();
  if (st.ok()) st = comm.Send(mine.data(), 1000, DataType::kI64, (r + 1) % n, stream);
  if (st.ok()) st = comm.Recv(got.data(), 1000, DataType::kI64, (r + n - 1) % n, stream);
  if (st.ok()) st = comm.Send(self_sent.data(), 10, DataType::kI64, r, stream);
  if (st.ok()) st = comm.Recv(self_got.data(), 10, DataType::kI64, r, stream);
  absl::Status end = GroupEnd();
  if (st.ok()) st = end;
  if (st.ok()) st = stream.Synchronize();
  const int prev = (r + n - 1) % n;
  bool ring_ok = st.ok() && self_got == self_sent;
  for (int i = 0; ring_ok && i < 1000; ++i) ring_ok = got[i] == prev * 100000 + i;
  if (!ring_ok) {
    ++failures;
    Say(absl::StrCat("rank ", r, ": grouped Send/Recv ring wrong: ", st.ToString()));
  }
  // Stats count payload bytes like the threads backend.
  const Stats stats = comm.stats();
  if (stats.sends != 2 || stats.recvs != 2 || stats.bytes_sent != 8080 ||
      stats.collective_calls != cases.size()) {
    ++failures;
    Say(absl::StrCat("rank ", r, ": stats wrong: sends=", stats.sends, " recvs=", stats.recvs,
                     " bytes_sent=", stats.bytes_sent, " collective_calls=", stats.collective_calls));
  }
  // A mismatched collective is an error naming both calls, not a wrong answer.
  std::vector<int32_t> buf(8, 1);
  st = comm.AllReduce(buf.data(), buf.data(), r == 0 ? 8 : 4, DataType::kI32, RedOp::kSum, stream);
  if (st.ok()) st = stream.Synchronize();
  if (st.code() != absl::StatusCode::kInvalidArgument ||
      std::string(st.message()).find("mismatch") == std::string::npos) {
    ++failures;
    Say(absl::StrCat("rank ", r, ": a mismatched AllReduce gave ", st.ToString()));
  }
  // Split into even and odd ranks; an all-reduce of ranks on each half.
  auto half = comm.Split(r % 2, r);
  if (!half.ok() || !*half) {
    ++failures;
    Say(absl::StrCat("rank ", r, ": Split failed: ", half.status().ToString()));
  } else {
    int32_t x = r, sum = 0;
    st = (*half)->AllReduce(&x, &sum, 1, DataType::kI32, RedOp::kSum, stream);
    if (st.ok()) st = stream.Synchronize();
    int32_t want = 0;
    for (int p = r % 2; p < n; p += 2) want += p;
    if (!st.ok() || sum != want) {
      ++failures;
      Say(absl::StrCat("rank ", r, ": split AllReduce gave ", sum, " want ", want, " ", st.ToString()));
    }
    st = (*half)->Destroy();
    if (!st.ok()) {
      ++failures;
      Say(absl::StrCat("rank ", r, ": split Destroy: ", st.ToString()));
    }
  }
  Say(absl::StrCat("rank ", r, ": ", cases.size(), " collective cases compared with the threads backend, ",
                   failures, " failures"));
  return failures == 0 ? 0 : 1;
}

// kill / abort: the victim leaves; the others' next AllReduce must fail naming it within the bound.
int Leave(Comm& comm, int victim, bool kill) {
  const int r = comm.rank();
  Stream stream;
  std::vector<int32_t> buf(1024, r);
  absl::Status st = comm.AllReduce(buf.data(), buf.data(), buf.size(), DataType::kI32, RedOp::kSum, stream);
  if (st.ok()) st = stream.Synchronize();
  if (!st.ok()) {
    Say(absl::StrCat("rank ", r, ": the first AllReduce failed: ", st.ToString()));
    return 1;
  }
  if (r == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are blocked by now
    if (kill) {
      Say(absl::StrCat("rank ", r, ": killing myself"));
      ::raise(SIGKILL);
    }
    Say(absl::StrCat("rank ", r, ": aborting"));
    st = comm.Abort();
    Say(absl::StrCat("rank ", r, ": Abort returned ", st.ToString()));
    return st.ok() ? 0 : 1;
  }
  const auto t0 = Clock::now();
  st = comm.AllReduce(buf.data(), buf.data(), buf.size(), DataType::kI32, RedOp::kSum, stream);
  if (st.ok()) st = stream.Synchronize();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Say(absl::StrCat("rank ", r, ": blocked AllReduce ended after ", static_cast<int>(ms), " ms with ",
                   st.ToString()));
  const bool names = std::string(st.message()).find(absl::StrCat("rank ", victim)) != std::string::npos;
  // UNAVAILABLE when this rank saw the connection break first, ABORTED when a peer that saw it aborted first.
  const bool code_ok = st.code() == absl::StatusCode::kAborted || st.code() == absl::StatusCode::kUnavailable;
  // The stated bound: a dead or aborting peer is noticed within 5 s (in practice milliseconds).
  if (!names || !code_ok || ms > 5000) {
    Say(absl::StrCat("rank ", r, ": EXPECTED an error naming rank ", victim, " within 5000 ms"));
    return 1;
  }
  // A broken communicator refuses further work with the same reason, and Abort still works.
  const absl::Status again = comm.GetAsyncError();
  (void)kill;
  (void)comm.Abort();
  return again.ok() ? 1 : 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    Say("usage: mp_worker check|kill V|abort V|init|fail V|env");
    return 64;
  }
  const std::string scenario = argv[1];
  const int arg = argc > 2 ? std::atoi(argv[2]) : 1;
  if (scenario == "env") {
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) {
      const char* x = std::getenv(v);
      Say(absl::StrCat(v, "=", x ? x : "(unset)"));
    }
    return 0;
  }
  if (scenario == "fail") {
    const int rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
    if (rank == arg) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Say("failing with exit status 3");
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  CommOptions options;
  options.timeout = std::chrono::seconds(20);
  auto comm = CommInitFromEnv(options);
  if (scenario == "init") {
    if (comm.ok()) {
      Say(absl::StrCat("init ok: rank ", (*comm)->rank(), " of ", (*comm)->size()));
      return (*comm)->Destroy().ok() ? 0 : 1;
    }
    Say(absl::StrCat("init error: ", comm.status().ToString()));
    return 2;
  }
  if (!comm.ok()) {
    Say(absl::StrCat("init error: ", comm.status().ToString()));
    return 1;
  }
  g_rank = (*comm)->rank();
  int rc = 1;
  if (scenario == "check") {
    rc = Check(**comm);
    absl::Status d = (*comm)->Destroy();  // reports the first error of the work: the deliberate mismatch
    if (!d.ok() && std::string(d.message()).find("mismatch") == std::string::npos) {
      Say(absl::StrCat("rank ", g_rank, ": Destroy: ", d.ToString()));
      rc = 1;
    }
  } else if (scenario == "kill" || scenario == "abort") {
    rc = Leave(**comm, arg, scenario == "kill");
  } else {
    Say("unknown scenario " + scenario);
    rc = 64;
  }
  return rc;
}

}  // namespace
}  // namespace distlab::comm

int main(int argc, char** argv) { return distlab::comm::Main(argc, argv); }
