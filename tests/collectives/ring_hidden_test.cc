// Hidden tests of stage B: the ring collectives against the runtime's built-in collectives, for every dtype
// and op (sampled pairwise with rank counts, counts and in/out of place), plus the byte counters and the
// rule that no built-in collective is called.
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/ring.h"
#include "reference/base/status.h"
#include "tests/collectives/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using comm::Comm;
using comm::DataType;
using comm::RedOp;
using comm::Stream;
using testutil::Compare;
using testutil::Input;
using testutil::Label;
using testutil::Options;

struct Case {
  DataType dtype;
  RedOp op;
  int n;
  size_t count;
  bool in_place;
};

// Every (dtype, op) pair once, with the rank count, count and placement cycling independently.
std::vector<Case> Pairwise(const std::vector<int>& ns, const std::vector<size_t>& counts) {
  std::vector<Case> cases;
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    for (RedOp op : comm::kAllRedOps) {
      cases.push_back({t, op, ns[k % ns.size()], counts[(k * 3) % counts.size()], k % 2 == 1});
      ++k;
    }
  }
  return cases;
}

// Joins per-rank complaints ("" for a good rank) and the runtime's statuses into one message.
std::string Verdict(const std::vector<absl::Status>& statuses, const std::vector<std::string>& why) {
  std::string msg;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) msg += "rank " + std::to_string(r) + ": " + statuses[r].ToString() + "\n";
    if (!why[r].empty()) msg += "rank " + std::to_string(r) + ": " + why[r] + "\n";
  }
  return msg;
}

using AllReduceFn = std::function<absl::Status(const void*, void*, size_t, DataType, RedOp, Comm&, Stream&)>;

// One all-reduce case: the candidate first (no built-in may be called), then the built-in as reference.
std::string CheckAllReduce(const Case& c, const AllReduceFn& fn) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<char> in = Input(c.dtype, c.op, r, c.count, 11);
        std::vector<char> out(in.size(), 0x5a), ref(in.size());
        std::vector<char> work = in;  // in place works on a copy of the input
        void* recv = c.in_place ? work.data() : out.data();
        const void* send = c.in_place ? work.data() : in.data();
        comm.ResetStats();
        RETURN_IF_ERROR(fn(send, recv, c.count, c.dtype, c.op, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 0) {
          why[r] =
              "called a built-in collective (" + std::to_string(comm.stats().collective_calls) + " calls)";
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(comm.AllReduce(in.data(), ref.data(), c.count, c.dtype, c.op, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        why[r] = Compare(recv, ref.data(), c.count, c.dtype);
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

#define EXPECT_CASES(cases, check)                                                      \
  for (const Case& c : cases) {                                                         \
    std::string err = check;                                                            \
    if (!err.empty()) {                                                                 \
      ADD_FAILURE() << Label(c.dtype, c.op, c.n, c.count, c.in_place) << ":\n" << err;  \
      return; /* the first failing case is enough, and a deadlock costs seconds each */ \
    }                                                                                   \
  }

TEST(RingAllReduce, MatchesBuiltinForEveryDtypeAndOp) {
  EXPECT_CASES(Pairwise({2, 3, 4, 5, 8}, {1, 7, 64, 1000, 4099}), CheckAllReduce(c, RingAllReduce));
}

TEST(RingAllReduce, InPlaceAndOutOfPlace) {
  for (bool in_place : {false, true}) {
    std::vector<Case> cases = {{DataType::kF32, RedOp::kSum, 4, 4096, in_place},
                               {DataType::kI32, RedOp::kMax, 3, 999, in_place}};
    EXPECT_CASES(cases, CheckAllReduce(c, RingAllReduce));
  }
}

// count not divisible by n, smaller than n, and zero.
TEST(RingAllReduce, AnyCount) {
  std::vector<Case> cases;
  for (int n : {3, 5, 8}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t(n - 1), size_t(n + 1), size_t{1009}}) {
      cases.push_back({DataType::kI64, RedOp::kSum, n, count, count % 2 == 1});
    }
  }
  EXPECT_CASES(cases, CheckAllReduce(c, RingAllReduce));
}

// Average: the ring divides by n exactly once, after the last step (integers truncate toward zero).
TEST(RingAllReduce, AverageDividesOnce) {
  std::vector<Case> cases = {{DataType::kI32, RedOp::kAvg, 4, 333, false},
                             {DataType::kF64, RedOp::kAvg, 3, 100, true},
                             {DataType::kU8, RedOp::kAvg, 8, 77, false}};
  EXPECT_CASES(cases, CheckAllReduce(c, RingAllReduce));
}

// Bytes: all ranks together send exactly 2(n-1) * S, each rank within one element of 2(n-1)/n * S, and
// receive what they send. Only Send/Recv move data.
TEST(RingAllReduce, SendsTwoTimesNMinusOneOverNOfS) {
  for (int n : {2, 3, 4, 8}) {
    for (size_t count : {size_t{1000}, size_t{1001}, size_t{1006}, size_t{5}}) {
      const DataType t = DataType::kF32;
      const double S = static_cast<double>(count * comm::SizeOf(t));
      std::vector<comm::Stats> stats(n);
      auto statuses = comm::RunRanks(
          n,
          [&](int r, Comm& comm, Stream& stream) -> absl::Status {
            std::vector<char> in = Input(t, RedOp::kSum, r, count, 3), out(in.size());
            comm.ResetStats();
            RETURN_IF_ERROR(RingAllReduce(in.data(), out.data(), count, t, RedOp::kSum, comm, stream));
            RETURN_IF_ERROR(stream.Synchronize());
            stats[r] = comm.stats();
            return absl::OkStatus();
          },
          Options());
      ASSERT_OK(comm::FirstError(statuses));
      uint64_t total = 0, received = 0;
      for (int r = 0; r < n; ++r) {
        total += stats[r].bytes_sent;
        received += stats[r].bytes_received;
        EXPECT_EQ(stats[r].collective_calls, 0u) << "rank " << r << " called a built-in collective";
        EXPECT_LE(std::abs(static_cast<double>(stats[r].bytes_sent) - 2.0 * (n - 1) / n * S),
                  static_cast<double>(comm::SizeOf(t)))
            << "rank " << r << " of " << n << ", count " << count << ": sent " << stats[r].bytes_sent
            << " bytes; 2(n-1)/n * S = " << 2.0 * (n - 1) / n * S;
      }
      EXPECT_EQ(total, static_cast<uint64_t>(2 * (n - 1) * S)) << "n " << n << ", count " << count;
      EXPECT_EQ(received, total);
      if (HasFailure()) return;
    }
  }
}

// Calls may be issued back to back without synchronizing in between (temporaries must outlive the work).
TEST(RingAllReduce, BackToBackCallsWithoutSynchronize) {
  const int n = 4;
  const size_t count = 5000;
  std::vector<std::string> why(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<std::vector<char>> in, out(3), ref(3);
        for (int k = 0; k < 3; ++k) {
          in.push_back(Input(DataType::kI32, RedOp::kSum, r, count, 20 + k));
          out[k].resize(in[k].size());
          ref[k].resize(in[k].size());
          RETURN_IF_ERROR(
              RingAllReduce(in[k].data(), out[k].data(), count, DataType::kI32, RedOp::kSum, comm, stream));
        }
        RETURN_IF_ERROR(stream.Synchronize());
        for (int k = 0; k < 3; ++k) {
          RETURN_IF_ERROR(
              comm.AllReduce(in[k].data(), ref[k].data(), count, DataType::kI32, RedOp::kSum, stream));
        }
        RETURN_IF_ERROR(stream.Synchronize());
        for (int k = 0; k < 3 && why[r].empty(); ++k)
          why[r] = Compare(out[k].data(), ref[k].data(), count, DataType::kI32);
        return absl::OkStatus();
      },
      Options());
  std::string err = Verdict(statuses, why);
  EXPECT_TRUE(err.empty()) << err;
}

// --- reduce-scatter --------------------------------------------------------------------------------------

std::string CheckReduceScatter(const Case& c) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const size_t es = comm::SizeOf(c.dtype);
        std::vector<char> in = Input(c.dtype, c.op, r, c.n * c.count, 5);
        std::vector<char> out(c.count * es, 0x5a), ref(c.count * es);
        std::vector<char> work = in;
        const void* send = c.in_place ? work.data() : in.data();
        void* recv = c.in_place ? work.data() + r * c.count * es : out.data();
        comm.ResetStats();
        RETURN_IF_ERROR(RingReduceScatter(send, recv, c.count, c.dtype, c.op, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 0) {
          why[r] = "called a built-in collective";
          return absl::OkStatus();
        }
        const double expect_sent = static_cast<double>((c.n - 1) * c.count * es);
        if (static_cast<double>(comm.stats().bytes_sent) != expect_sent) {
          why[r] = "sent " + std::to_string(comm.stats().bytes_sent) +
                   " bytes; (n-1)/n * S = " + std::to_string(expect_sent);
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(comm.ReduceScatter(in.data(), ref.data(), c.count, c.dtype, c.op, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        why[r] = Compare(recv, ref.data(), c.count, c.dtype);
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

TEST(RingReduceScatter, MatchesBuiltinForEveryDtypeAndOp) {
  EXPECT_CASES(Pairwise({2, 3, 4, 8}, {1, 3, 100, 257}), CheckReduceScatter(c));
}

// --- all-gather ------------------------------------------------------------------------------------------

std::string CheckAllGather(const Case& c) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const size_t es = comm::SizeOf(c.dtype);
        std::vector<char> in = Input(c.dtype, RedOp::kSum, r, c.count, 6);
        std::vector<char> out(c.n * c.count * es, 0x5a), ref(c.n * c.count * es);
        if (c.in_place) std::copy(in.begin(), in.end(), out.begin() + r * c.count * es);
        const void* send = c.in_place ? out.data() + r * c.count * es : in.data();
        comm.ResetStats();
        RETURN_IF_ERROR(RingAllGather(send, out.data(), c.count, c.dtype, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 0) {
          why[r] = "called a built-in collective";
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(comm.AllGather(in.data(), ref.data(), c.count, c.dtype, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        why[r] = Compare(out.data(), ref.data(), c.n * c.count, c.dtype);
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

TEST(RingAllGather, MatchesBuiltinForEveryDtype) {
  std::vector<Case> cases;
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    cases.push_back({t, RedOp::kSum, 2 + k % 4, size_t{1} + 37 * k, k % 2 == 0});
    ++k;
  }
  cases.push_back({DataType::kF32, RedOp::kSum, 8, 4096, true});
  EXPECT_CASES(cases, CheckAllGather(c));
}

// --- broadcast -------------------------------------------------------------------------------------------

std::string CheckBroadcast(const Case& c, int root) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<char> in = Input(c.dtype, RedOp::kSum, root, c.count, 9);  // the root's data
        std::vector<char> out(in.size(), 0x5a);
        if (c.in_place && r == root) out = in;
        const void* send =
            r == root ? (c.in_place ? static_cast<const void*>(out.data()) : in.data()) : nullptr;
        comm.ResetStats();
        RETURN_IF_ERROR(RingBroadcast(send, out.data(), c.count, c.dtype, root, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 0) {
          why[r] = "called a built-in collective";
          return absl::OkStatus();
        }
        why[r] = Compare(out.data(), in.data(), c.count, c.dtype);
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

TEST(RingBroadcast, EveryRootAnyCount) {
  for (int n : {2, 3, 5}) {
    for (int root = 0; root < n; ++root) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
        Case c{DataType::kI32, RedOp::kSum, n, count, root % 2 == 1};
        std::string err = CheckBroadcast(c, root);
        ASSERT_TRUE(err.empty()) << "root " << root << ", " << Label(c.dtype, c.op, n, count, c.in_place)
                                 << ":\n"
                                 << err;
      }
    }
  }
}

// Large enough for several pipeline segments; every dtype.
TEST(RingBroadcast, LargeAndEveryDtype) {
  ASSERT_TRUE(CheckBroadcast({DataType::kF32, RedOp::kSum, 4, 600000, false}, 1).empty());
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    Case c{t, RedOp::kSum, 3, size_t{17} + k, k % 2 == 0};
    std::string err = CheckBroadcast(c, k % 3);
    ASSERT_TRUE(err.empty()) << Label(t, c.op, 3, c.count, c.in_place) << ":\n" << err;
    ++k;
  }
}

// ring.h: a pipelined chain. S = 2.4 MB on 4 ranks with root 1: the chain is 1 -> 2 -> 3 -> 0, the data
// goes in k >= 2 segments, and every rank between the root and the last forwards segment i (Send) before it
// receives segment i+1 (Recv) -- so the segments travel the chain at the same time, and the time is about
// (n - 2 + k) segment times instead of (n - 1) whole-array times (notes/01-collectives.md, section 4).
TEST(RingBroadcast, PipelinedChainForwardsEachSegmentBeforeTheNext) {
  const int n = 4, root = 1;
  const size_t count = 600000;  // f32
  std::vector<std::vector<testutil::P2pCall>> calls(n);
  std::vector<std::string> why(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int r, Comm& inner, Stream& stream) -> absl::Status {
        testutil::RecordingComm comm(inner);
        std::vector<char> in = Input(DataType::kF32, RedOp::kSum, root, count, 9), out(in.size(), 0x5a);
        RETURN_IF_ERROR(RingBroadcast(r == root ? in.data() : nullptr, out.data(), count, DataType::kF32,
                                      root, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        calls[r] = comm.calls();
        why[r] = Compare(out.data(), in.data(), count, DataType::kF32);
        return absl::OkStatus();
      },
      Options());
  ASSERT_EQ(Verdict(statuses, why), "");
  auto describe = [](const std::vector<testutil::P2pCall>& c) {
    std::string d;
    for (const auto& x : c) d += std::string(x.send ? " Send(" : " Recv(") + std::to_string(x.count) + ")";
    return d;
  };
  const size_t segments = calls[root].size();
  EXPECT_GE(segments, 2u) << "the root sent 2.4 MB in one message: nothing to pipeline";
  for (int pos = 0; pos < n; ++pos) {
    const int r = (root + pos) % n, prev = (r + n - 1) % n, next = (r + 1) % n;
    const auto& c = calls[r];
    std::string want;
    size_t sent = 0, received = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const bool ok = pos == 0       ? (c[i].send && c[i].peer == next)
                      : pos == n - 1 ? (!c[i].send && c[i].peer == prev)
                                     : (c[i].send == (i % 2 == 1) && c[i].peer == (c[i].send ? next : prev) &&
                                        (!c[i].send || c[i].count == c[i - 1].count));
      ASSERT_TRUE(ok) << "rank " << r << " (position " << pos << " of the chain from root " << root
                      << ") called" << describe(c) << "; want "
                      << (pos == 0 ? "only Sends to the next rank"
                          : pos == n - 1
                              ? "only Recvs from the previous rank"
                              : "Recv(segment i) from the previous rank, then Send(segment i) to the "
                                "next, before Recv(segment i + 1)");
      (c[i].send ? sent : received) += c[i].count;
    }
    EXPECT_EQ(pos == 0 ? sent : received, count) << "rank " << r;
    if (pos > 0 && pos < n - 1) EXPECT_EQ(sent, count) << "rank " << r;
  }
}

TEST(RingBroadcast, RejectsBadRoot) {
  auto statuses = comm::RunRanks(
      2,
      [](int, Comm& comm, Stream& stream) -> absl::Status {
        int32_t x = 0;
        absl::Status s = RingBroadcast(&x, &x, 1, DataType::kI32, 2, comm, stream);
        if (s.code() != absl::StatusCode::kInvalidArgument) {
          return absl::InternalError("root 2 of 2 ranks gave " + s.ToString() + ", want INVALID_ARGUMENT");
        }
        return absl::OkStatus();
      },
      Options());
  EXPECT_OK(comm::FirstError(statuses));
}

// --- all-to-all ------------------------------------------------------------------------------------------

TEST(RingAllToAll, MatchesBuiltin) {
  std::vector<Case> cases = {{DataType::kI32, RedOp::kSum, 2, 5, false},
                             {DataType::kF64, RedOp::kSum, 3, 1, false},
                             {DataType::kU8, RedOp::kSum, 4, 33, false},
                             {DataType::kBF16, RedOp::kSum, 5, 8, false},
                             {DataType::kF32, RedOp::kSum, 8, 1000, false}};
  for (const Case& c : cases) {
    std::vector<std::string> why(c.n);
    auto statuses = comm::RunRanks(
        c.n,
        [&](int r, Comm& comm, Stream& stream) -> absl::Status {
          const size_t elems = c.n * c.count;
          std::vector<char> in = Input(c.dtype, c.op, r, elems, 4);
          std::vector<char> out(in.size(), 0x5a), ref(in.size());
          comm.ResetStats();
          RETURN_IF_ERROR(RingAllToAll(in.data(), out.data(), c.count, c.dtype, comm, stream));
          RETURN_IF_ERROR(stream.Synchronize());
          if (comm.stats().collective_calls != 0) {
            why[r] = "called a built-in collective";
            return absl::OkStatus();
          }
          RETURN_IF_ERROR(comm.AllToAll(in.data(), ref.data(), c.count, c.dtype, stream));
          RETURN_IF_ERROR(stream.Synchronize());
          why[r] = Compare(out.data(), ref.data(), elems, c.dtype);
          return absl::OkStatus();
        },
        Options());
    std::string err = Verdict(statuses, why);
    ASSERT_TRUE(err.empty()) << Label(c.dtype, c.op, c.n, c.count, false) << ":\n" << err;
  }
}

}  // namespace
}  // namespace distlab::collectives
