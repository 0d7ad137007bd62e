// Hidden tests of stage C, the harness: the sweep, the checks (#wrong), the timing loop and the rows.
// Correct outputs come from the runtime's built-in collectives; timings are never compared to numbers. Every
// case draws its inputs (sweep bounds and factors, rank counts, counts, dtypes, ops, roots, iteration counts,
// requested sizes) from the grading seed; the draws keep what makes each case bite: sweeps that end exactly
// on -e, non-integer factors where truncating and rounding give different sizes, reduce-scatter counts at
// which each rank's share of the check pattern differs from rank 0's, at least one warm-up call. A failure
// names the call and its input, never an expected array, and ends with the seed (testing::SeedNote()).
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/bandwidth.h"
#include "labs/collectives/harness.h"
#include "reference/base/status.h"
#include "tests/collectives/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using comm::DataType;
using comm::RedOp;
using testing::CaseRandom;
using testing::SeedNote;

const std::vector<RedOp> kPlainOps = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};

std::string Num(double v) {
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

std::string Sizes(const std::vector<size_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size() && i < 16; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 16) s += ", ... (" + std::to_string(v.size()) + " sizes)";
  return s + "}";
}

// harness.h's sweep, as the header states it: the running product in double, each size truncated, repeats
// skipped. `round` rounds to nearest instead (only to pick factors at which the difference shows).
std::vector<size_t> Sweep(size_t min, size_t max, double f, bool round = false) {
  std::vector<size_t> out;
  for (double s = static_cast<double>(min); s <= static_cast<double>(max); s *= f) {
    const size_t v = round ? static_cast<size_t>(std::llround(s)) : static_cast<size_t>(s);
    if (!out.empty() && v == out.back()) continue;
    out.push_back(v);
  }
  return out;
}

// A factor with two decimals in [lo, hi] / 100, not a whole number (a student can type it back exactly).
double Hundredths(CaseRandom& rng, int lo, int hi) {
  for (;;) {
    const int64_t h = rng.Int(lo, hi);
    if (h % 100 != 0) return static_cast<double>(h) / 100;
  }
}

std::string SweepCall(size_t min, size_t max, double f) {
  return "SweepSizes(" + std::to_string(min) + ", " + std::to_string(max) + ", " + Num(f) + ")";
}

void ExpectSweep(size_t min, size_t max, double f, const std::string& rule) {
  const std::string call = SweepCall(min, max, f);
  absl::StatusOr<std::vector<size_t>> got = SweepSizes(min, max, f);
  ASSERT_TRUE(got.ok()) << call << " failed: " << got.status() << "\n" << SeedNote();
  if (*got != Sweep(min, max, f)) {
    FAIL() << call << " returned " << Sizes(*got) << ": " << rule << "\n" << SeedNote();
  }
}

// Integer factors: three sweeps that end exactly on -e, one that stops short of it, and min == max.
TEST(Harness, SweepSizesGeometric) {
  CaseRandom rng;
  const std::string rule = "not min, min*f, min*f^2, ... while <= max (harness.h)";
  for (int i = 0; i < 5; ++i) {
    const size_t min = static_cast<size_t>(rng.Int(1, 2000)), f = static_cast<size_t>(rng.Int(2, 4));
    size_t max = min;
    for (int k = static_cast<int>(rng.Int(1, 7)); k > 0; --k) max *= f;
    if (i == 3) max += static_cast<size_t>(rng.Int(1, static_cast<int64_t>(max * (f - 1) - 1)));
    if (i == 4) max = min;
    ExpectSweep(min, max, static_cast<double>(f), rule);
  }
}

// A non-integer factor: floor of the running product (harness.h), repeated sizes skipped. Three sweeps with
// factors (two decimals) at which truncating and rounding give different sizes, and one with a factor close
// to 1 from a tiny min, where sizes repeat.
TEST(Harness, SweepSizesNonIntegerFactor) {
  CaseRandom rng;
  const std::string rule =
      "not the running product s_k = min * f^k (in double) truncated to whole bytes, repeats skipped, while "
      "s_k <= max (harness.h)";
  for (int i = 0; i < 3; ++i) {
    size_t min, max;
    double f;
    do {
      min = static_cast<size_t>(rng.Int(1, 300));
      f = Hundredths(rng, 105, 295);
      max = min * static_cast<size_t>(rng.Int(5, 60));
    } while (Sweep(min, max, f) == Sweep(min, max, f, /*round=*/true));
    ExpectSweep(min, max, f, rule);
  }
  const size_t tiny = static_cast<size_t>(rng.Int(1, 4)), max = static_cast<size_t>(rng.Int(5, 40));
  ExpectSweep(tiny, max, Hundredths(rng, 105, 145), rule);
}

// min == 0, min > max, and a factor <= 1 with min < max: each INVALID_ARGUMENT.
TEST(Harness, SweepSizesRejectsBadFlags) {
  CaseRandom rng;
  const size_t max = static_cast<size_t>(rng.Int(2, 1 << 20));
  struct Bad {
    size_t min, max;
    double f;
  };
  for (const Bad& b :
       {Bad{0, max, Hundredths(rng, 150, 400)}, Bad{max + static_cast<size_t>(rng.Int(1, 1000)), max, 2},
        Bad{static_cast<size_t>(rng.Int(1, static_cast<int64_t>(max) - 1)), max,
            rng.Pick(std::vector<double>{1.0, Hundredths(rng, 5, 99), -Hundredths(rng, 50, 300)})}}) {
    EXPECT_EQ(SweepSizes(b.min, b.max, b.f).status().code(), absl::StatusCode::kInvalidArgument)
        << SweepCall(b.min, b.max, b.f) << ": want INVALID_ARGUMENT naming the flag\n"
        << SeedNote();
  }
}

PerfOptions Opts(Collective c, int n, DataType t = DataType::kF32, RedOp op = RedOp::kSum) {
  PerfOptions o;
  o.collective = c;
  o.ranks = n;
  o.dtype = t;
  o.op = op;
  o.iters = 2;
  o.warmup_iters = 1;
  o.root = n - 1;
  o.comm = testutil::Options();
  return o;
}

std::string Describe(const PerfOptions& o) {
  std::string s = std::string(CollectiveName(o.collective)) + " (" + std::string(AlgorithmName(o.algorithm)) +
                  ") on " + std::to_string(o.ranks) + " ranks, " + std::string(comm::Name(o.dtype));
  if (o.collective == Collective::kAllReduce || o.collective == Collective::kReduceScatter ||
      o.collective == Collective::kReduce) {
    s += " " + std::string(comm::Name(o.op));
  }
  if (o.collective == Collective::kBroadcast || o.collective == Collective::kReduce) {
    s += ", root " + std::to_string(o.root);
  }
  return s;
}

// The exact reduction of CheckValue at whole-array index i, stored as the dtype stores it (harness.h).
double ReducedCheckValue(RedOp op, DataType t, int n, size_t i) {
  double acc = CheckValue(op, 0, i);
  for (int p = 1; p < n; ++p) {
    const double v = CheckValue(op, p, i);
    acc = op == RedOp::kProd  ? acc * v
          : op == RedOp::kMax ? std::max(acc, v)
          : op == RedOp::kMin ? std::min(acc, v)
                              : acc + v;
  }
  if (op == RedOp::kAvg) acc = comm::IsFloating(t) ? acc / n : std::trunc(acc / n);
  alignas(8) unsigned char scratch[8];
  comm::SetElementFromDouble(scratch, 0, t, acc);
  return comm::ElementAsDouble(scratch, 0, t);
}

// True when some rank's share of a reduce-scatter's output (elements r*count ...) differs from rank 0's, so
// that a check comparing with the wrong share shows.
bool SharesDiffer(RedOp op, DataType t, int n, size_t count) {
  for (int r = 1; r < n; ++r) {
    for (size_t j = 0; j < count && j < 64; ++j) {
      if (ReducedCheckValue(op, t, n, r * count + j) != ReducedCheckValue(op, t, n, j)) return true;
    }
  }
  return false;
}

// A count in [lo, hi]; for a reduce-scatter one at which the ranks' shares differ (SharesDiffer), where
// there is one (prod on 5 ranks has the same pattern in every share).
size_t DrawCount(CaseRandom& rng, const PerfOptions& o, size_t lo, size_t hi) {
  for (int tries = 0;; ++tries) {
    const size_t c = static_cast<size_t>(rng.Int(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
    if (o.collective != Collective::kReduceScatter || tries == 100 ||
        SharesDiffer(o.op, o.dtype, o.ranks, c)) {
      return c;
    }
  }
}

// Elements of the send and receive buffers (comm.h's rules) for the built-in reference below.
void BufferSizes(Collective c, size_t count, int n, size_t* send, size_t* recv) {
  *send = *recv = count;
  if (c == Collective::kReduceScatter) *send = n * count;
  if (c == Collective::kAllGather) *recv = n * count;
  if (c == Collective::kAllToAll) *send = *recv = n * count;
}

absl::Status Builtin(const PerfOptions& o, const void* s, void* r, size_t count, comm::Comm& comm,
                     comm::Stream& st) {
  switch (o.collective) {
    case Collective::kAllReduce:
      return comm.AllReduce(s, r, count, o.dtype, o.op, st);
    case Collective::kReduceScatter:
      return comm.ReduceScatter(s, r, count, o.dtype, o.op, st);
    case Collective::kAllGather:
      return comm.AllGather(s, r, count, o.dtype, st);
    case Collective::kBroadcast:
      return comm.Broadcast(s, r, count, o.dtype, o.root, st);
    case Collective::kReduce:
      return comm.Reduce(s, r, count, o.dtype, o.op, o.root, st);
    case Collective::kAllToAll:
      return comm.AllToAll(s, r, count, o.dtype, st);
    default:
      return absl::InvalidArgumentError("not in this test");
  }
}

// For one collective: the built-in's true output on FillCheckInput's data has 0 wrong elements, and
// corrupting 3 of them gives 3 (on every rank that has an output).
void ExpectCountWrongFindsCorruption(const PerfOptions& o, size_t count) {
  std::vector<int64_t> clean(o.ranks, -7), dirty(o.ranks, -7);
  auto statuses = comm::RunRanks(
      o.ranks,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        size_t ns, nr;
        BufferSizes(o.collective, count, o.ranks, &ns, &nr);
        const size_t es = comm::SizeOf(o.dtype);
        std::vector<char> send(ns * es), recv(nr * es, 0);
        FillCheckInput(o, r, count, send.data());
        RETURN_IF_ERROR(Builtin(o, send.data(), recv.data(), count, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        clean[r] = CountWrong(o, r, count, recv.data());
        if (r == o.root || o.collective != Collective::kReduce) {
          for (size_t j : {size_t{0}, nr / 2, nr - 1}) {
            comm::SetElementFromDouble(recv.data(), j, o.dtype,
                                       comm::ElementAsDouble(recv.data(), j, o.dtype) + 3);
          }
        }
        dirty[r] = CountWrong(o, r, count, recv.data());
        return absl::OkStatus();
      },
      o.comm);
  const std::string input = "CountWrong, " + Describe(o) + ", count " + std::to_string(count);
  ASSERT_OK(comm::FirstError(statuses)) << input << "\n" << SeedNote();
  for (int r = 0; r < o.ranks; ++r) {
    const bool has_output = o.collective != Collective::kReduce || r == o.root;
    if (clean[r] != 0) {
      FAIL() << input << ": rank " << r << "'s correct output (the built-in's) counted " << clean[r]
             << " wrong elements\n"
             << SeedNote();
    }
    if (dirty[r] != (has_output ? 3 : 0)) {
      FAIL() << input << ": rank " << r << "'s output with "
             << (has_output ? "3 elements corrupted (the first, the middle and the last)"
                            : "no output of its own (not the root)")
             << " counted " << dirty[r] << " wrong elements\n"
             << SeedNote();
    }
  }
}

TEST(Harness, CountWrongForEveryCollective) {
  CaseRandom rng;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll}) {
    const int n = static_cast<int>(rng.Int(2, 8));
    const DataType t =
        rng.Pick(std::vector<DataType>{DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64});
    PerfOptions o = Opts(c, n, t, rng.Pick(std::vector<RedOp>{RedOp::kSum, RedOp::kMax, RedOp::kMin}));
    o.root = static_cast<int>(rng.Int(0, n - 1));
    ExpectCountWrongFindsCorruption(o, DrawCount(rng, o, 12, 200));
    if (HasFailure()) return;
  }
}

// Every (dtype, op) pair, alternately on an all-reduce and a reduce-scatter, with drawn ranks and counts.
TEST(Harness, CountWrongForEveryDtypeAndOp) {
  CaseRandom rng;
  const int flip = static_cast<int>(rng.Int(0, 1));
  int k = 0;
  for (DataType t : comm::kAllDataTypes) {
    for (RedOp op : comm::kAllRedOps) {
      const Collective c = (k + flip) % 2 ? Collective::kReduceScatter : Collective::kAllReduce;
      const PerfOptions o = Opts(c, static_cast<int>(rng.Int(2, 8)), t, op);
      ExpectCountWrongFindsCorruption(o, DrawCount(rng, o, 5, 100));
      if (HasFailure()) return;
      ++k;
    }
  }
}

// The timing loop makes exactly warmup + iters calls, and returns a positive time per call.
TEST(Harness, TimeCollectiveRunsWarmupPlusIters) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 5));
  const DataType t = rng.Pick(std::vector<DataType>{DataType::kF32, DataType::kI32});
  PerfOptions o = Opts(Collective::kAllReduce, n, t, rng.Pick(kPlainOps));
  o.warmup_iters = static_cast<int>(rng.Int(1, 5));
  o.iters = static_cast<int>(rng.Int(1, 6));
  const size_t count = static_cast<size_t>(rng.Int(100, 2000));
  std::vector<uint64_t> calls(n);
  std::vector<double> secs(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        std::vector<char> send(count * comm::SizeOf(o.dtype)), recv(send.size());
        FillCheckInput(o, r, count, send.data());
        comm.ResetStats();
        ASSIGN_OR_RETURN(secs[r], TimeCollective(o, count, send.data(), recv.data(), comm, stream));
        calls[r] = comm.stats().collective_calls;
        if (!stream.Idle()) return absl::InternalError("returned before the stream was done");
        return absl::OkStatus();
      },
      o.comm);
  const std::string input = "TimeCollective with -w " + std::to_string(o.warmup_iters) + " -n " +
                            std::to_string(o.iters) + ", " + Describe(o) + ", count " + std::to_string(count);
  ASSERT_OK(comm::FirstError(statuses)) << input << "\n" << SeedNote();
  for (int r = 0; r < n; ++r) {
    if (calls[r] != static_cast<uint64_t>(o.warmup_iters + o.iters)) {
      ADD_FAILURE() << input << ": rank " << r << "'s communicator counted " << calls[r]
                    << " collective calls; want the warm-up calls and the timed ones\n"
                    << SeedNote();
    }
    EXPECT_GT(secs[r], 0) << input << ": rank " << r << "\n" << SeedNote();
  }
}

// -n 0 or below is INVALID_ARGUMENT.
TEST(Harness, TimeCollectiveRejectsZeroIters) {
  CaseRandom rng;
  PerfOptions o = Opts(Collective::kAllReduce, 1);
  o.iters = static_cast<int>(rng.Int(-3, 0));
  o.warmup_iters = static_cast<int>(rng.Int(0, 3));
  auto statuses = comm::RunRanks(1, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    float x = 0;
    auto t = TimeCollective(o, 1, &x, &x, comm, stream);
    return t.status().code() == absl::StatusCode::kInvalidArgument
               ? absl::OkStatus()
               : absl::InternalError("gave " + t.status().ToString() + "; want INVALID_ARGUMENT");
  });
  EXPECT_OK(comm::FirstError(statuses))
      << "TimeCollective with -n " << o.iters << " -w " << o.warmup_iters << "\n"
      << SeedNote();
}

// The ring algorithm goes through Send/Recv only; the built-in makes one collective call; combinations
// without an implementation are errors.
TEST(Harness, LaunchCollectiveDispatches) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 5));
  const size_t count = static_cast<size_t>(rng.Int(1, 64));
  std::vector<int> value(n);
  int sum = 0;
  for (int& v : value) sum += (v = static_cast<int>(rng.Int(-50, 50)));
  const std::string input =
      "LaunchCollective, all_reduce of " + std::to_string(count) + " f32 on " + std::to_string(n) + " ranks";
  auto statuses = comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        PerfOptions o = Opts(Collective::kAllReduce, n);
        std::vector<float> x(count, static_cast<float>(value[r])), y(count, 0);
        o.algorithm = Algorithm::kRing;
        comm.ResetStats();
        RETURN_IF_ERROR(LaunchCollective(o, x.data(), y.data(), count, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 0 || comm.stats().sends == 0) {
          return absl::InternalError("the ring all-reduce did not go through Send/Recv");
        }
        for (size_t i = 0; i < count; ++i) {
          if (y[i] != static_cast<float>(sum)) {
            return absl::InternalError("the ring all-reduce left element " + std::to_string(i) + " at " +
                                       std::to_string(y[i]) + ", not the sum over ranks");
          }
        }
        o.algorithm = Algorithm::kBuiltin;
        RETURN_IF_ERROR(LaunchCollective(o, x.data(), y.data(), count, comm, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        if (comm.stats().collective_calls != 1) {
          return absl::InternalError("the built-in was not called exactly once");
        }
        o.algorithm = Algorithm::kRing;
        o.collective = Collective::kReduce;
        if (LaunchCollective(o, x.data(), y.data(), count, comm, stream).code() !=
            absl::StatusCode::kInvalidArgument) {
          return absl::InternalError("a ring reduce should be INVALID_ARGUMENT");
        }
        return absl::OkStatus();
      },
      testutil::Options());
  EXPECT_OK(comm::FirstError(statuses)) << input << "\n" << SeedNote();
}

bool PerRank(Collective c) {
  return c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll;
}

// S and count as nccl-tests (v2.13.12 and later) reports them for `bytes` (bandwidth.h), from the formulas.
void NcclTestsSize(Collective c, size_t bytes, size_t es, int n, size_t* want_bytes, size_t* want_count) {
  const size_t elements = bytes / es;
  size_t count = elements;
  if (PerRank(c)) count = elements / n - (elements / n) % (16 / es);
  *want_count = count;
  *want_bytes = count * es * (PerRank(c) ? n : 1);
}

// A row: S and count as nccl-tests reports them (`want_bytes`, `want_count`), nothing wrong,
// busbw = algbw * factor, algbw = S / t.
void ExpectGoodRow(const PerfOptions& o, size_t bytes, size_t want_bytes, size_t want_count) {
  const std::string input = "MeasureSize, " + Describe(o) + ", " + std::to_string(bytes) +
                            " bytes requested" + (o.check ? "" : ", unchecked (-c 0)");
  ASSERT_OK_AND_ASSIGN(PerfRow row, MeasureSize(o, bytes));
  std::vector<std::string> why;
  if (row.count != want_count) {
    why.push_back("row.count is " + std::to_string(row.count) + ": not the count nccl-tests calls with");
  }
  if (row.bytes != want_bytes) {
    why.push_back("row.bytes is " + std::to_string(row.bytes) +
                  ": not the S nccl-tests reports for that count");
  }
  const bool in_place = o.collective != Collective::kAllToAll;
  if (row.in_place.measured != in_place) {
    why.push_back(in_place ? "the in-place variant was not measured" : "an in-place all_to_all was measured");
  }
  for (const PerfPoint* p : {&row.out_of_place, &row.in_place}) {
    if (!p->measured) continue;
    const std::string v = p == &row.in_place ? "in place: " : "out of place: ";
    if (p->wrong != (o.check ? 0 : -1)) {
      why.push_back(v + "#wrong is " + std::to_string(p->wrong) +
                    (o.check ? " for a correct collective" : "; an unchecked row reports -1"));
    }
    if (!(p->time_us > 0)) why.push_back(v + "time " + Num(p->time_us) + " us is not positive");
    if (std::fabs(p->algbw - row.bytes / (p->time_us * 1e-6) / 1e9) > 1e-9 * p->algbw) {
      why.push_back(v + "algbw " + Num(p->algbw) + " GB/s is not row.bytes / time");
    }
    if (std::fabs(p->busbw - p->algbw * BusBwFactor(o.collective, o.ranks)) > 1e-9 * p->algbw) {
      why.push_back(v + "busbw " + Num(p->busbw) + " GB/s is not algbw times the bus-bandwidth factor");
    }
  }
  if (!why.empty()) {
    std::string msg;
    for (const std::string& w : why) msg += "  " + w + "\n";
    FAIL() << input << ":\n" << msg << SeedNote();
  }
}

// Each built-in collective with drawn ranks, dtype, op (not prod: its check pattern can be the same in every
// rank's share), root and size; the per-rank collectives at sizes whose per-rank count is not a multiple of
// 16 bytes.
TEST(Harness, MeasureSizeBuiltinRows) {
  CaseRandom rng;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll}) {
    const int n = static_cast<int>(rng.Int(2, 6));
    const DataType t = testutil::AnyDtype(rng);
    // Ops whose check pattern differs between the ranks' shares of a reduce-scatter.
    PerfOptions o = Opts(c, n, t, rng.Pick(std::vector<RedOp>{RedOp::kSum, RedOp::kMax, RedOp::kMin}));
    o.root = static_cast<int>(rng.Int(0, n - 1));
    const size_t es = comm::SizeOf(o.dtype);
    size_t bytes, want_bytes, want_count;
    for (;;) {
      bytes = static_cast<size_t>(rng.Int(1000, 70000));
      NcclTestsSize(c, bytes, es, n, &want_bytes, &want_count);
      if (PerRank(c) && (bytes / es / n) % (16 / es) == 0) continue;  // trimming must matter
      if (c == Collective::kReduceScatter && !SharesDiffer(o.op, o.dtype, n, want_count)) continue;
      break;
    }
    ExpectGoodRow(o, bytes, want_bytes, want_count);
    if (HasFailure()) return;
  }
}

// The ring algorithm of every collective it covers, with drawn ranks, dtype, op (not prod) and size; S and
// count as CollectiveCount and CollectiveBytes give them.
TEST(Harness, MeasureSizeRingRows) {
  CaseRandom rng;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kAllToAll}) {
    const int n = static_cast<int>(rng.Int(2, 6));
    const DataType t = testutil::AnyDtype(rng);
    PerfOptions o =
        Opts(c, n, t, rng.Pick(std::vector<RedOp>{RedOp::kSum, RedOp::kMax, RedOp::kMin, RedOp::kAvg}));
    o.algorithm = Algorithm::kRing;
    o.root = static_cast<int>(rng.Int(0, n - 1));
    const size_t es = comm::SizeOf(o.dtype);
    size_t bytes, count;
    do {
      bytes = static_cast<size_t>(rng.Int(2000, 30000));
      count = CollectiveCount(c, bytes, es, n);
    } while (c == Collective::kReduceScatter && !SharesDiffer(o.op, o.dtype, n, count));
    ExpectGoodRow(o, bytes, static_cast<size_t>(CollectiveBytes(c, count, es, n)), count);
    if (HasFailure()) return;
  }
}

TEST(Harness, UncheckedRowsReportMinusOne) {
  CaseRandom rng;
  const Collective c = rng.Pick(std::vector<Collective>{Collective::kAllReduce, Collective::kAllGather,
                                                        Collective::kBroadcast, Collective::kReduceScatter});
  PerfOptions o = Opts(c, static_cast<int>(rng.Int(2, 4)));
  o.check = false;
  const size_t bytes = 16 * static_cast<size_t>(rng.Int(16, 256));
  size_t want_bytes, want_count;
  NcclTestsSize(c, bytes, 4, o.ranks, &want_bytes, &want_count);
  ExpectGoodRow(o, bytes, want_bytes, want_count);
}

// A sweep that ends exactly on -e: one row per size; -b 0 is an error.
TEST(Harness, RunPerfOneRowPerSize) {
  CaseRandom rng;
  const Collective c = rng.Pick(
      std::vector<Collective>{Collective::kAllGather, Collective::kAllReduce, Collective::kBroadcast});
  const int n = static_cast<int>(rng.Int(2, 4));
  PerfOptions o = Opts(c, n, rng.Pick(std::vector<DataType>{DataType::kU8, DataType::kF32, DataType::kI32}));
  o.min_bytes = static_cast<size_t>(rng.Int(64, 256));
  const size_t f = static_cast<size_t>(rng.Int(2, 4));
  const int k = static_cast<int>(rng.Int(1, 3));
  o.max_bytes = o.min_bytes;
  for (int i = 0; i < k; ++i) o.max_bytes *= f;
  o.step_factor = static_cast<double>(f);
  const std::string input = "RunPerf -b " + std::to_string(o.min_bytes) + " -e " +
                            std::to_string(o.max_bytes) + " -f " + std::to_string(f) + ", " + Describe(o);
  ASSERT_OK_AND_ASSIGN(std::vector<PerfRow> rows, RunPerf(o));
  if (rows.size() != static_cast<size_t>(k + 1)) {
    FAIL() << input << ": " << rows.size() << " rows; want one row per size of the sweep, -e included\n"
           << SeedNote();
  }
  size_t size = o.min_bytes;
  for (size_t i = 0; i < rows.size(); ++i, size *= f) {
    size_t want_bytes, want_count;
    NcclTestsSize(c, size, comm::SizeOf(o.dtype), o.ranks, &want_bytes, &want_count);
    EXPECT_TRUE(rows[i].bytes == want_bytes && rows[i].count == want_count)
        << input << ": row " << i << " (" << size << " bytes requested) has S = " << rows[i].bytes
        << ", count " << rows[i].count << "\n"
        << SeedNote();
    EXPECT_EQ(rows[i].out_of_place.wrong, 0) << input << ": row " << i << "\n" << SeedNote();
  }
  o.min_bytes = 0;
  EXPECT_FALSE(RunPerf(o).ok()) << "RunPerf with -b 0 succeeded\n" << SeedNote();
}

}  // namespace
}  // namespace distlab::collectives
