// Hidden tests of stage B: the ring collectives against the runtime's built-in collectives, for every dtype
// and op, plus the byte counters, the pipelined broadcast chain and the rule that no built-in collective is
// called. Every case draws its inputs (rank counts, counts, placements, roots, dtypes and ops where the
// property holds for all of them, and the data) from the grading seed (test_util.h); the draws keep what
// makes each case bite: counts that n does not divide where the remainder matters, counts below n, roots
// other than 0 where the chain must start at the root, at least two broadcast segments.
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
using testing::CaseRandom;
using testing::SeedNote;
using testutil::Compare;
using testutil::Distinct;
using testutil::EvenCount;
using testutil::Input;
using testutil::Label;
using testutil::Options;
using testutil::UnevenCount;
using testutil::Verdict;

struct Case {
  DataType dtype;
  RedOp op;
  int n;
  size_t count;
  bool in_place;
  uint64_t seed = 0;  // of the data (testutil::Input)
};

const std::vector<DataType> kIntegers = {DataType::kI32, DataType::kI64, DataType::kU8};
// The ops whose result does not depend on n beyond the reduction itself (avg has its own cases).
const std::vector<RedOp> kPlainOps = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};

// Every (dtype, op) pair once, each with its own drawn rank count, count and placement. The counts cycle
// through four kinds -- below n, just above n, hundreds, thousands -- all but the third not divisible by n.
std::vector<Case> EveryDtypeAndOp(CaseRandom& rng, int max_n, bool uneven) {
  std::vector<Case> cases;
  const int flip = static_cast<int>(rng.Int(0, 1));
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    for (RedOp op : comm::kAllRedOps) {
      const int n = static_cast<int>(rng.Int(2, max_n));
      size_t count = 0;
      if (!uneven) {
        count = static_cast<size_t>(rng.Int(k % 2 == 0 ? 1 : 100, k % 2 == 0 ? 12 : 300));
      } else if (k % 4 == 0) {
        count = static_cast<size_t>(rng.Int(1, n - 1));
      } else if (k % 4 == 1) {
        count = UnevenCount(rng, n, n + 1, 4 * n);
      } else if (k % 4 == 2) {
        count = static_cast<size_t>(rng.Int(100, 1200));
      } else {
        count = UnevenCount(rng, n, 1500, 4500);
      }
      cases.push_back({t, op, n, count, (k + flip) % 2 == 1, rng.Next()});
      ++k;
    }
  }
  return cases;
}

using AllReduceFn = std::function<absl::Status(const void*, void*, size_t, DataType, RedOp, Comm&, Stream&)>;

// One all-reduce case: the candidate first (no built-in may be called), then the built-in as reference.
std::string CheckAllReduce(const Case& c, const AllReduceFn& fn) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<char> in = Input(c.dtype, c.op, r, c.count, c.seed);
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
        why[r] = Compare(recv, ref.data(), c.count, c.dtype, "the built-in AllReduce");
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

// Runs `check` on each case and stops at the first that fails (a deadlock costs seconds each), naming it.
#define EXPECT_CASES(what, cases, label, check)                                         \
  for (const Case& c : cases) {                                                         \
    std::string err = check;                                                            \
    if (!err.empty()) {                                                                 \
      ADD_FAILURE() << what << ", " << label << ":\n" << err << SeedNote();             \
      return; /* the first failing case is enough, and a deadlock costs seconds each */ \
    }                                                                                   \
  }

#define AR_LABEL Label(c.dtype, c.op, c.n, c.count, c.in_place)

TEST(RingAllReduce, MatchesBuiltinForEveryDtypeAndOp) {
  CaseRandom rng;
  EXPECT_CASES("RingAllReduce", EveryDtypeAndOp(rng, 8, true), AR_LABEL, CheckAllReduce(c, RingAllReduce));
}

// Two drawn (dtype, op) pairs, each in both placements; counts that n divides (placement is the point).
TEST(RingAllReduce, InPlaceAndOutOfPlace) {
  CaseRandom rng;
  std::vector<Case> cases;
  for (int i = 0; i < 2; ++i) {
    const DataType t = testutil::AnyDtype(rng);
    const RedOp op = rng.Pick(kPlainOps);
    const int n = static_cast<int>(rng.Int(2, 8));
    const size_t count = EvenCount(rng, n, 1000, 5000);
    const uint64_t seed = rng.Next();
    for (bool in_place : {false, true}) cases.push_back({t, op, n, count, in_place, seed});
  }
  EXPECT_CASES("RingAllReduce", cases, AR_LABEL, CheckAllReduce(c, RingAllReduce));
}

// Three rank counts; for each, count 0, a count below n, one just above n and one in the hundreds (the last
// two not divisible by n).
TEST(RingAllReduce, AnyCount) {
  CaseRandom rng;
  std::vector<Case> cases;
  for (int n : Distinct(rng, 3, 8, 3)) {
    const DataType t = rng.Pick(kIntegers);
    for (size_t count : {size_t{0}, static_cast<size_t>(rng.Int(1, n - 1)),
                         UnevenCount(rng, n, n + 1, 2 * n - 1), UnevenCount(rng, n, 300, 1500)}) {
      cases.push_back({t, RedOp::kSum, n, count, rng.Chance(0.5), rng.Next()});
    }
  }
  EXPECT_CASES("RingAllReduce", cases, AR_LABEL, CheckAllReduce(c, RingAllReduce));
}

// Average: the ring divides by n exactly once, after the last step (integers truncate toward zero). An
// integer dtype, a floating one and any one; counts n does not divide.
TEST(RingAllReduce, AverageDividesOnce) {
  CaseRandom rng;
  std::vector<Case> cases;
  for (const DataType t :
       {rng.Pick(kIntegers), rng.Pick(std::vector<DataType>{DataType::kF32, DataType::kF64}),
        testutil::AnyDtype(rng)}) {
    const int n = static_cast<int>(rng.Int(2, 8));
    cases.push_back({t, RedOp::kAvg, n, UnevenCount(rng, n, 50, 500), rng.Chance(0.5), rng.Next()});
  }
  EXPECT_CASES("RingAllReduce", cases, AR_LABEL, CheckAllReduce(c, RingAllReduce));
}

// Bytes: all ranks together send exactly 2(n-1) * S, each rank within one element of 2(n-1)/n * S, and
// receive what they send. Only Send/Recv move data. Four rank counts; for each a count n divides, one it
// does not (with a remainder other than n/2 when n > 2: a rank that skips the wrong chunks shows in its
// bytes), one below n and one of any kind.
TEST(RingAllReduce, SendsTwoTimesNMinusOneOverNOfS) {
  CaseRandom rng;
  for (int n : Distinct(rng, 2, 8, 4)) {
    size_t skewed = UnevenCount(rng, n, 500, 1500);
    while (n > 2 && 2 * (skewed % n) == static_cast<size_t>(n)) skewed = UnevenCount(rng, n, 500, 1500);
    const DataType t =
        rng.Pick(std::vector<DataType>{DataType::kF32, DataType::kI32, DataType::kF64, DataType::kBF16});
    for (size_t count : {EvenCount(rng, n, 500, 1500), skewed, static_cast<size_t>(rng.Int(1, n - 1)),
                         static_cast<size_t>(rng.Int(1, 1500))}) {
      const size_t es = comm::SizeOf(t);
      const double S = static_cast<double>(count * es);
      const uint64_t seed = rng.Next();
      std::vector<comm::Stats> stats(n);
      auto statuses = comm::RunRanks(
          n,
          [&](int r, Comm& comm, Stream& stream) -> absl::Status {
            std::vector<char> in = Input(t, RedOp::kSum, r, count, seed), out(in.size());
            comm.ResetStats();
            RETURN_IF_ERROR(RingAllReduce(in.data(), out.data(), count, t, RedOp::kSum, comm, stream));
            RETURN_IF_ERROR(stream.Synchronize());
            stats[r] = comm.stats();
            return absl::OkStatus();
          },
          Options());
      const std::string input = "RingAllReduce, " + Label(t, RedOp::kSum, n, count, false) +
                                " (S = " + std::to_string(count * es) + " bytes)";
      const std::string errors = Verdict(statuses, std::vector<std::string>(n));
      if (!errors.empty()) FAIL() << input << ":\n" << errors << SeedNote();
      uint64_t total = 0, received = 0;
      std::string why;
      for (int r = 0; r < n; ++r) {
        total += stats[r].bytes_sent;
        received += stats[r].bytes_received;
        if (!why.empty()) continue;
        if (stats[r].collective_calls != 0) {
          why = "rank " + std::to_string(r) + " called a built-in collective";
        } else if (std::abs(static_cast<double>(stats[r].bytes_sent) - 2.0 * (n - 1) / n * S) >
                   static_cast<double>(es)) {
          why = "rank " + std::to_string(r) + " sent " + std::to_string(stats[r].bytes_sent) +
                " bytes, more than one element (" + std::to_string(es) +
                " bytes) away from 2(n-1)/n * S = " + std::to_string(2.0 * (n - 1) / n * S);
        }
      }
      if (why.empty() && total != static_cast<uint64_t>(2 * (n - 1) * S)) {
        why = "all ranks together sent " + std::to_string(total) +
              " bytes; 2(n-1) * S = " + std::to_string(static_cast<uint64_t>(2 * (n - 1) * S));
      }
      if (why.empty() && received != total) {
        why = "all ranks together received " + std::to_string(received) + " bytes but sent " +
              std::to_string(total);
      }
      if (!why.empty()) FAIL() << input << ": " << why << "\n" << SeedNote();
    }
  }
}

// Calls may be issued back to back without synchronizing in between (temporaries must outlive the work).
TEST(RingAllReduce, BackToBackCallsWithoutSynchronize) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 8));
  const int calls = static_cast<int>(rng.Int(2, 4));
  const DataType t = rng.Pick(kIntegers);
  const RedOp op = rng.Pick(kPlainOps);
  const size_t count = EvenCount(rng, n, 2000, 6000);
  const uint64_t seed = rng.Next();
  std::vector<std::string> why(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<std::vector<char>> in, out(calls), ref(calls);
        for (int k = 0; k < calls; ++k) {
          in.push_back(Input(t, op, r, count, seed + k));
          out[k].resize(in[k].size());
          ref[k].resize(in[k].size());
          RETURN_IF_ERROR(RingAllReduce(in[k].data(), out[k].data(), count, t, op, comm, stream));
        }
        RETURN_IF_ERROR(stream.Synchronize());
        for (int k = 0; k < calls; ++k) {
          RETURN_IF_ERROR(comm.AllReduce(in[k].data(), ref[k].data(), count, t, op, stream));
        }
        RETURN_IF_ERROR(stream.Synchronize());
        for (int k = 0; k < calls && why[r].empty(); ++k) {
          why[r] = Compare(out[k].data(), ref[k].data(), count, t, "the built-in AllReduce");
          if (!why[r].empty()) why[r] = "call " + std::to_string(k + 1) + ": " + why[r];
        }
        return absl::OkStatus();
      },
      Options());
  std::string err = Verdict(statuses, why);
  if (!err.empty())
    ADD_FAILURE() << calls << " RingAllReduce calls back to back, then one Synchronize, "
                  << Label(t, op, n, count, false) << ":\n"
                  << err << SeedNote();
}

// --- reduce-scatter --------------------------------------------------------------------------------------

std::string CheckReduceScatter(const Case& c) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const size_t es = comm::SizeOf(c.dtype);
        std::vector<char> in = Input(c.dtype, c.op, r, c.n * c.count, c.seed);
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
                   " bytes; (n-1)/n * S = " + std::to_string(static_cast<uint64_t>(expect_sent));
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(comm.ReduceScatter(in.data(), ref.data(), c.count, c.dtype, c.op, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        why[r] = Compare(recv, ref.data(), c.count, c.dtype, "the built-in ReduceScatter");
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

TEST(RingReduceScatter, MatchesBuiltinForEveryDtypeAndOp) {
  CaseRandom rng;
  EXPECT_CASES("RingReduceScatter", EveryDtypeAndOp(rng, 8, false), AR_LABEL, CheckReduceScatter(c));
}

// --- all-gather ------------------------------------------------------------------------------------------

std::string CheckAllGather(const Case& c) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const size_t es = comm::SizeOf(c.dtype);
        std::vector<char> in = Input(c.dtype, RedOp::kSum, r, c.count, c.seed);
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
        why[r] = Compare(out.data(), ref.data(), c.n * c.count, c.dtype, "the built-in AllGather");
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

#define DATA_LABEL Label(c.dtype, c.n, c.count, c.in_place)

// Every dtype with a drawn rank count, count and placement; then a large in-place one on 5 to 8 ranks.
TEST(RingAllGather, MatchesBuiltinForEveryDtype) {
  CaseRandom rng;
  std::vector<Case> cases;
  const int flip = static_cast<int>(rng.Int(0, 1));
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    const int n = static_cast<int>(rng.Int(2, 8));
    cases.push_back(
        {t, RedOp::kSum, n, static_cast<size_t>(rng.Int(1, 300)), (k + flip) % 2 == 0, rng.Next()});
    ++k;
  }
  cases.push_back({testutil::AnyDtype(rng), RedOp::kSum, static_cast<int>(rng.Int(5, 8)),
                   static_cast<size_t>(rng.Int(2000, 5000)), true, rng.Next()});
  EXPECT_CASES("RingAllGather", cases, DATA_LABEL, CheckAllGather(c));
}

// --- broadcast -------------------------------------------------------------------------------------------

std::string CheckBroadcast(const Case& c, int root) {
  std::vector<std::string> why(c.n);
  auto statuses = comm::RunRanks(
      c.n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<char> in = Input(c.dtype, RedOp::kSum, root, c.count, c.seed);  // the root's data
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
        why[r] = Compare(out.data(), in.data(), c.count, c.dtype, "the root's data");
        return absl::OkStatus();
      },
      Options());
  return Verdict(statuses, why);
}

// Three rank counts (2, then one of 3-4 and one of 5-7), every root of each, and count 0, a few elements and
// about a thousand.
TEST(RingBroadcast, EveryRootAnyCount) {
  CaseRandom rng;
  for (int n : {2, static_cast<int>(rng.Int(3, 4)), static_cast<int>(rng.Int(5, 7))}) {
    const DataType t = testutil::AnyDtype(rng);
    for (size_t count :
         {size_t{0}, static_cast<size_t>(rng.Int(1, 9)), static_cast<size_t>(rng.Int(500, 1500))}) {
      const uint64_t seed = rng.Next();
      for (int root = 0; root < n; ++root) {
        Case c{t, RedOp::kSum, n, count, root % 2 == 1, seed};
        std::string err = CheckBroadcast(c, root);
        if (!err.empty())
          FAIL() << "RingBroadcast from root " << root << ", " << DATA_LABEL << ":\n" << err << SeedNote();
      }
    }
  }
}

// Large enough for several pipeline segments (1.2 to 2.6 MB from a root other than 0); then every dtype
// with a small count and any root.
TEST(RingBroadcast, LargeAndEveryDtype) {
  CaseRandom rng;
  {
    const DataType t = rng.Pick(std::vector<DataType>{DataType::kF32, DataType::kI32, DataType::kF64});
    const int n = static_cast<int>(rng.Int(3, 5));
    const int root = static_cast<int>(rng.Int(1, n - 1));
    Case c{t,
           RedOp::kSum,
           n,
           static_cast<size_t>(rng.Int(1200000, 2600000)) / comm::SizeOf(t),
           rng.Chance(0.5),
           rng.Next()};
    std::string err = CheckBroadcast(c, root);
    if (!err.empty())
      FAIL() << "RingBroadcast from root " << root << ", " << DATA_LABEL << ":\n" << err << SeedNote();
  }
  for (DataType t : comm::kAllDataTypes) {
    const int n = static_cast<int>(rng.Int(2, 6));
    const int root = static_cast<int>(rng.Int(0, n - 1));
    Case c{t, RedOp::kSum, n, static_cast<size_t>(rng.Int(1, 100)), rng.Chance(0.5), rng.Next()};
    std::string err = CheckBroadcast(c, root);
    if (!err.empty())
      FAIL() << "RingBroadcast from root " << root << ", " << DATA_LABEL << ":\n" << err << SeedNote();
  }
}

// ring.h: a pipelined chain. S of 1.2 to 2.6 MB on 3 to 6 ranks from a root r0 other than 0: the chain is
// r0 -> r0+1 -> ... (mod n), the data goes in k >= 2 segments, and every rank between the root and the last
// forwards segment i (Send) before it receives segment i+1 (Recv) -- so the segments travel the chain at
// the same time, and the time is about (n - 2 + k) segment times instead of (n - 1) whole-array times
// (notes/01-collectives.md, section 4).
TEST(RingBroadcast, PipelinedChainForwardsEachSegmentBeforeTheNext) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(3, 6)), root = static_cast<int>(rng.Int(1, n - 1));
  const DataType t =
      rng.Pick(std::vector<DataType>{DataType::kF32, DataType::kI32, DataType::kF64, DataType::kI64});
  const size_t count = static_cast<size_t>(rng.Int(1200000, 2600000)) / comm::SizeOf(t);
  const uint64_t seed = rng.Next();
  const std::string input = "RingBroadcast from root " + std::to_string(root) + ", " +
                            Label(t, n, count, false) + " (S = " + std::to_string(count * comm::SizeOf(t)) +
                            " bytes)";
  std::vector<std::vector<testutil::P2pCall>> calls(n);
  std::vector<std::string> why(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int r, Comm& inner, Stream& stream) -> absl::Status {
        testutil::RecordingComm comm(inner);
        std::vector<char> in = Input(t, RedOp::kSum, root, count, seed), out(in.size(), 0x5a);
        RETURN_IF_ERROR(
            RingBroadcast(r == root ? in.data() : nullptr, out.data(), count, t, root, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        calls[r] = comm.calls();
        why[r] = Compare(out.data(), in.data(), count, t, "the root's data");
        return absl::OkStatus();
      },
      Options());
  const std::string err = Verdict(statuses, why);
  if (!err.empty()) FAIL() << input << ":\n" << err << SeedNote();
  auto describe = [](const std::vector<testutil::P2pCall>& c) {
    std::string d;
    for (size_t i = 0; i < c.size() && i < 12; ++i) {
      d += std::string(c[i].send ? " Send(" : " Recv(") + std::to_string(c[i].count) + " to/from rank " +
           std::to_string(c[i].peer) + ")";
    }
    if (c.size() > 12) d += " ... (" + std::to_string(c.size()) + " calls)";
    return d;
  };
  const size_t segments = calls[root].size();
  EXPECT_GE(segments, 2u) << input << ": the root sent it in one message: nothing to pipeline\n"
                          << SeedNote();
  for (int pos = 0; pos < n; ++pos) {
    const int r = (root + pos) % n, prev = (r + n - 1) % n, next = (r + 1) % n;
    const auto& c = calls[r];
    size_t sent = 0, received = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const bool ok = pos == 0       ? (c[i].send && c[i].peer == next)
                      : pos == n - 1 ? (!c[i].send && c[i].peer == prev)
                                     : (c[i].send == (i % 2 == 1) && c[i].peer == (c[i].send ? next : prev) &&
                                        (!c[i].send || c[i].count == c[i - 1].count));
      if (!ok)
        FAIL() << input << ": rank " << r << " (position " << pos << " of the chain from root " << root
               << ") called" << describe(c) << "; want "
               << (pos == 0       ? "only Sends to the next rank"
                   : pos == n - 1 ? "only Recvs from the previous rank"
                                  : "Recv(segment i) from the previous rank, then Send(segment i) to the "
                                    "next, before Recv(segment i + 1)")
               << "\n"
               << SeedNote();
      (c[i].send ? sent : received) += c[i].count;
    }
    EXPECT_EQ(pos == 0 ? sent : received, count) << input << ": rank " << r << "\n" << SeedNote();
    if (pos > 0 && pos < n - 1) {
      EXPECT_EQ(sent, count) << input << ": rank " << r << "\n" << SeedNote();
    }
  }
}

// A root outside [0, n), above or below, is INVALID_ARGUMENT on every rank.
TEST(RingBroadcast, RejectsBadRoot) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 6));
  for (const int root : {static_cast<int>(rng.Int(n, n + 5)), static_cast<int>(rng.Int(-5, -1))}) {
    auto statuses = comm::RunRanks(
        n,
        [root](int, Comm& comm, Stream& stream) -> absl::Status {
          int32_t x = 0;
          absl::Status s = RingBroadcast(&x, &x, 1, DataType::kI32, root, comm, stream);
          if (s.code() != absl::StatusCode::kInvalidArgument) {
            return absl::InternalError("gave " + s.ToString() + ", want INVALID_ARGUMENT");
          }
          return absl::OkStatus();
        },
        Options());
    const std::string err = Verdict(statuses, std::vector<std::string>(n));
    if (!err.empty())
      FAIL() << "RingBroadcast with root " << root << " on " << n << " ranks:\n" << err << SeedNote();
  }
}

// --- all-to-all ------------------------------------------------------------------------------------------

// Five drawn rank counts and dtypes, four small counts and one in the hundreds.
TEST(RingAllToAll, MatchesBuiltin) {
  CaseRandom rng;
  std::vector<Case> cases;
  const std::vector<int> ns = Distinct(rng, 2, 8, 5);
  for (size_t i = 0; i < ns.size(); ++i) {
    const size_t count = static_cast<size_t>(i + 1 == ns.size() ? rng.Int(300, 1000) : rng.Int(1, 100));
    cases.push_back({testutil::AnyDtype(rng), RedOp::kSum, ns[i], count, false, rng.Next()});
  }
  for (const Case& c : cases) {
    std::vector<std::string> why(c.n);
    auto statuses = comm::RunRanks(
        c.n,
        [&](int r, Comm& comm, Stream& stream) -> absl::Status {
          const size_t elems = c.n * c.count;
          std::vector<char> in = Input(c.dtype, c.op, r, elems, c.seed);
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
          why[r] = Compare(out.data(), ref.data(), elems, c.dtype, "the built-in AllToAll");
          return absl::OkStatus();
        },
        Options());
    std::string err = Verdict(statuses, why);
    if (!err.empty()) FAIL() << "RingAllToAll, " << DATA_LABEL << ":\n" << err << SeedNote();
  }
}

}  // namespace
}  // namespace distlab::collectives
