// Hidden tests of stage C, the arithmetic: S per collective, algbw, nccl-tests' busbw factors, the
// shared-memory bound and the alpha-beta model. Every case draws its inputs (counts, element sizes, rank
// counts, times, bandwidths, alpha and beta) from the grading seed and checks the functions against the
// formulas of bandwidth.h, written out here; the draws keep what makes each case bite (per-rank counts that
// are not a multiple of 16 bytes, more than one rank). A failure names the call and what it returned, never
// the expected number, and ends with the seed (testing::SeedNote()).
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/bandwidth.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using testing::CaseRandom;

const std::vector<Collective> kAll(std::begin(kAllCollectives), std::end(kAllCollectives));
const std::vector<size_t> kElemSizes = {1, 2, 4, 8};

bool PerRank(Collective c) {
  return c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll;
}

std::string Num(double v) {
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

// Within a relative 1e-9 of `want` (another order of the same arithmetic stays far inside it).
bool Close(double got, double want) {
  return std::fabs(got - want) <= 1e-9 * std::max(std::fabs(want), 1e-300) || got == want;
}

// Collects the failing calls of a case and reports the first few in one failure.
class Failures {
 public:
  void Add(std::string line) { lines_.push_back(std::move(line)); }
  void Report(const std::string& rule) const {
    if (lines_.empty()) return;
    std::string msg;
    for (size_t i = 0; i < lines_.size() && i < 4; ++i) msg += "  " + lines_[i] + "\n";
    if (lines_.size() > 4) msg += "  (and " + std::to_string(lines_.size() - 4) + " more drawn inputs)\n";
    ADD_FAILURE() << rule << ":\n" << msg << testing::SeedNote();
  }

 private:
  std::vector<std::string> lines_;
};

int Ceil2(int n) {  // ceil(log2 n) for n >= 1
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

std::string Name(Collective c) { return std::string(CollectiveName(c)); }

TEST(BandwidthMath, BytesOfEachCollective) {
  CaseRandom rng;
  Failures f;
  for (int i = 0; i < 6; ++i) {
    const size_t count = static_cast<size_t>(rng.Int(1, 1 << 22)), es = rng.Pick(kElemSizes);
    const int n = static_cast<int>(rng.Int(2, 64));
    for (Collective c : kAll) {
      const double want = static_cast<double>(count) * es * (PerRank(c) ? n : 1);
      const double got = CollectiveBytes(c, count, es, n);
      if (got != want) {
        f.Add("CollectiveBytes(" + Name(c) + ", count " + std::to_string(count) + ", " + std::to_string(es) +
              "-byte elements, " + std::to_string(n) + " ranks) returned " + Num(got));
      }
    }
  }
  f.Report("S is not the bytes of the whole array the collective works on (bandwidth.h)");
}

// nccl-tests (v2.13.12 and later): whole elements, and for the per-rank collectives a per-rank count
// rounded down to a multiple of 16 bytes. The per-rank draws have a per-rank count that is not a multiple of
// 16 bytes (and some requests end in part of an element).
TEST(BandwidthMath, CountsRoundDown) {
  CaseRandom rng;
  Failures f;
  auto check = [&](Collective c, size_t bytes, size_t es, int n) {
    const size_t elements = bytes / es;
    size_t want = elements;
    if (PerRank(c)) {
      const size_t per = elements / n, multiple = 16 / es;
      want = per - per % multiple;
    }
    const size_t got = CollectiveCount(c, bytes, es, n);
    if (got != want) {
      f.Add("CollectiveCount(" + Name(c) + ", " + std::to_string(bytes) + " bytes, " + std::to_string(es) +
            "-byte elements, " + std::to_string(n) + " ranks) returned " + std::to_string(got));
    }
  };
  for (Collective c : {Collective::kReduceScatter, Collective::kAllGather, Collective::kAllToAll}) {
    for (size_t es : kElemSizes) {
      const int n = static_cast<int>(rng.Int(2, 16));
      const size_t multiple = 16 / es;
      const size_t per = multiple * static_cast<size_t>(rng.Int(0, 500)) +
                         static_cast<size_t>(rng.Int(1, static_cast<int64_t>(multiple) - 1));
      const size_t elements = per * n + static_cast<size_t>(rng.Int(0, n - 1));
      check(c, elements * es + static_cast<size_t>(rng.Int(0, static_cast<int64_t>(es) - 1)), es, n);
    }
    // A per-rank count already a multiple of 16 bytes.
    const size_t es = rng.Pick(kElemSizes);
    const int n = static_cast<int>(rng.Int(2, 16));
    check(c, (16 / es) * static_cast<size_t>(rng.Int(1, 500)) * n * es, es, n);
  }
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce}) {
    const size_t bytes = static_cast<size_t>(rng.Int(0, 1 << 20)), es = rng.Pick(kElemSizes);
    check(c, bytes, es, static_cast<int>(rng.Int(2, 16)));
  }
  f.Report("the count is not the one nccl-tests computes for that many bytes (bandwidth.h)");
}

TEST(BandwidthMath, AlgBwIsBytesOverTime) {
  CaseRandom rng;
  Failures f;
  for (int i = 0; i < 5; ++i) {
    const double bytes = std::floor(rng.Real(1, 1e10)), t = rng.Real(1e-6, 10);
    const double got = AlgBw(bytes, t);
    if (!Close(got, bytes / t / 1e9))
      f.Add("AlgBw(" + Num(bytes) + " bytes, " + Num(t) + " s) returned " + Num(got));
  }
  for (const double t : {0.0, -rng.Real(1e-6, 1)}) {
    const double bytes = std::floor(rng.Real(1, 1e9)), got = AlgBw(bytes, t);
    if (got != 0) f.Add("AlgBw(" + Num(bytes) + " bytes, " + Num(t) + " s) returned " + Num(got) + ", not 0");
  }
  f.Report("algbw is not S / t in GB/s (1e9 bytes per second), or 0 when t <= 0 (bandwidth.h)");
}

double Factor(Collective c, int n) {
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return (n - 1.0) / n;
    default:
      return 1.0;
  }
}

TEST(BandwidthMath, BusBwFactors) {
  CaseRandom rng;
  Failures f;
  std::vector<int> ns = {1};
  for (int i = 0; i < 5; ++i) ns.push_back(static_cast<int>(rng.Int(2, 128)));
  for (int n : ns) {
    for (Collective c : kAll) {
      const double got = BusBwFactor(c, n);
      if (!Close(got, Factor(c, n))) {
        f.Add("BusBwFactor(" + Name(c) + ", " + std::to_string(n) + " ranks) returned " + Num(got));
      }
    }
  }
  f.Report("not nccl-tests' bus-bandwidth factor (bandwidth.h)");
}

TEST(BandwidthMath, BusBwIsAlgBwTimesFactor) {
  CaseRandom rng;
  Failures f;
  for (Collective c : kAll) {
    const int n = static_cast<int>(rng.Int(2, 64));
    const double bytes = std::floor(rng.Real(1e3, 1e10)), t = rng.Real(1e-5, 5);
    const double got = BusBw(c, n, bytes, t);
    if (!Close(got, bytes / t / 1e9 * Factor(c, n))) {
      f.Add("BusBw(" + Name(c) + ", " + std::to_string(n) + " ranks, " + Num(bytes) + " bytes, " + Num(t) +
            " s) returned " + Num(got));
    }
  }
  f.Report("busbw is not algbw times nccl-tests' factor (bandwidth.h)");
}

// R reads and W writes of S against a copy's 1 + 1: algbw <= 2B / (R + W).
TEST(BandwidthMath, SharedMemoryBound) {
  CaseRandom rng;
  Failures f;
  for (int i = 0; i < 2; ++i) {
    for (Collective c : kAll) {
      const int n = static_cast<int>(rng.Int(2, 64));
      const double B = rng.Real(1, 500);
      double reads = n, writes = n;  // all-reduce, all-to-all, sendrecv
      if (c == Collective::kReduceScatter || c == Collective::kReduce) writes = 1;
      if (c == Collective::kAllGather) reads = 1;
      if (c == Collective::kBroadcast) reads = 1, writes = n - 1;
      const double got = AlgBwBound(c, n, B);
      if (!Close(got, 2 * B / (reads + writes))) {
        f.Add("AlgBwBound(" + Name(c) + ", " + std::to_string(n) + " ranks, B = " + Num(B) +
              " GB/s) returned " + Num(got));
      }
    }
  }
  f.Report(
      "not S over the least time of the least traffic the collective needs, at the rate of a copy "
      "(bandwidth.h)");
}

AlphaBeta DrawAlphaBeta(CaseRandom& rng) { return {rng.Real(1e-7, 1e-4), rng.Real(1e-12, 1e-9)}; }

std::string Text(const AlphaBeta& ab) {
  return "alpha " + Num(ab.alpha_s) + " s, beta " + Num(ab.beta_s_per_byte) + " s/B";
}

TEST(AlphaBeta, RingTime) {
  CaseRandom rng;
  Failures f;
  for (int i = 0; i < 6; ++i) {
    const AlphaBeta ab = DrawAlphaBeta(rng);
    const int n = i == 0 ? 1 : static_cast<int>(rng.Int(2, 64));
    const double S = std::floor(rng.Real(1e3, 1e9));
    const double want = n == 1 ? 0 : 2.0 * (n - 1) * (ab.alpha_s + S / n * ab.beta_s_per_byte);
    const double got = RingAllReduceTime(ab, n, S);
    if (!Close(got, want)) {
      f.Add("RingAllReduceTime(" + Text(ab) + ", " + std::to_string(n) + " ranks, S = " + Num(S) +
            " bytes) returned " + Num(got) + " s");
    }
  }
  f.Report("not the ring's 2(n-1) steps of one S/n message each (bandwidth.h)");
}

TEST(AlphaBeta, TreeTime) {
  CaseRandom rng;
  Failures f;
  for (int i = 0; i < 6; ++i) {
    const AlphaBeta ab = DrawAlphaBeta(rng);
    const int n = i == 0 ? 1 : i == 1 ? 1 << rng.Int(1, 6) : static_cast<int>(rng.Int(2, 100));
    const double S = std::floor(rng.Real(1e3, 1e9));
    const double want = 2.0 * Ceil2(n) * (ab.alpha_s + S * ab.beta_s_per_byte);
    const double got = TreeAllReduceTime(ab, n, S);
    if (!Close(got, want)) {
      f.Add("TreeAllReduceTime(" + Text(ab) + ", " + std::to_string(n) + " ranks, S = " + Num(S) +
            " bytes) returned " + Num(got) + " s");
    }
  }
  f.Report("not 2 ceil(log2 n) rounds of one whole-S message each (bandwidth.h)");
}

TEST(AlphaBeta, CrossoverEqualizesTheCosts) {
  CaseRandom rng;
  const AlphaBeta ab = DrawAlphaBeta(rng);
  for (int n : {static_cast<int>(rng.Int(4, 8)), static_cast<int>(rng.Int(9, 32)),
                static_cast<int>(rng.Int(33, 128))}) {
    const double s = RingTreeCrossoverBytes(ab, n);
    const std::string call =
        "RingTreeCrossoverBytes(" + Text(ab) + ", " + std::to_string(n) + " ranks) = " + Num(s);
    ASSERT_GT(s, 0) << call << ": the ring sends more messages, so below some S the tree is faster\n"
                    << testing::SeedNote();
    const double ring = RingAllReduceTime(ab, n, s), tree = TreeAllReduceTime(ab, n, s);
    EXPECT_NEAR(ring, tree, 1e-9 * tree) << call << ": the two times differ there\n" << testing::SeedNote();
    EXPECT_LT(TreeAllReduceTime(ab, n, 0.5 * s), RingAllReduceTime(ab, n, 0.5 * s))
        << call << ": the tree must win below it\n"
        << testing::SeedNote();
    EXPECT_GT(TreeAllReduceTime(ab, n, 2 * s), RingAllReduceTime(ab, n, 2 * s))
        << call << ": the ring must win above it\n"
        << testing::SeedNote();
    if (HasFailure()) return;
  }
}

// On 2 and 3 ranks the ring sends no more messages than the tree, whatever alpha and beta.
TEST(AlphaBeta, NoCrossoverWhenTheRingNeverLoses) {
  CaseRandom rng;
  for (int n : {2, 3}) {
    const AlphaBeta ab = DrawAlphaBeta(rng);
    EXPECT_EQ(RingTreeCrossoverBytes(ab, n), 0.0)
        << "RingTreeCrossoverBytes(" << Text(ab) << ", " << n << " ranks): the ring is never slower there\n"
        << testing::SeedNote();
  }
}

}  // namespace
}  // namespace distlab::collectives
