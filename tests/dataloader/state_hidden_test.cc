// Hidden tests, Lab 2 stage E, the pieces that do not fork: the checkpoint's text form, the seeds, rank x
// worker sharding, Megatron's consumed-samples sampler and the samplers' state. Expected values come from the
// formulas in state.h and sampler.h, computed here independently. Every case draws its states, seeds,
// ranges, rank and worker counts from the grading seed (test_util.h).
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/sampler.h"
#include "labs/dataloader/state.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::distlab::testing::CaseRandom;
using testing::Drawn;
using ::testing::HasSubstr;
using testing::Show;
using testing::Str;
using V = std::vector<int64_t>;

std::string Describe(const LoaderState& s) {
  return Str("state {epoch ", s.epoch, ", delivered ", s.delivered, ", generator ", s.generator,
             ", base_seed ", s.base_seed, ", num_workers ", s.num_workers, ", done ", s.done,
             ", last_worker ", s.last_worker, ", rng ", Show(s.rng), ", stream ", Show(s.stream), "}");
}

LoaderState DrawState(CaseRandom& rng) {
  LoaderState s;
  s.epoch = rng.Int(-1, 48);
  s.delivered = rng.Int(0, 999);
  s.generator = rng.Next();
  s.base_seed = rng.Next();
  s.num_workers = static_cast<int>(rng.Int(0, 4));
  s.done = rng.Chance(0.5);
  s.last_worker = static_cast<int>(rng.Int(-1, 4));
  const size_t readers = static_cast<size_t>(std::max(1, s.num_workers));
  if (rng.Chance(0.75)) {
    for (size_t w = 0; w < readers; ++w) s.rng.push_back(rng.Chance(0.1) ? ~uint64_t{0} : rng.Next());
  }
  if (rng.Chance(0.5)) {
    for (size_t w = 0; w < readers; ++w) s.stream.push_back(rng.Int(0, 99999));
  }
  return s;
}

TEST(State, RoundTripsEveryField) {
  CaseRandom rng;
  for (int it = 0; it < 200; ++it) {
    const LoaderState s = DrawState(rng);
    SCOPED_TRACE(Drawn(Describe(s)));
    const std::string text = EncodeLoaderState(s);
    ASSERT_OK_AND_ASSIGN(LoaderState b, DecodeLoaderState(text));
    EXPECT_EQ(b.epoch, s.epoch);
    EXPECT_EQ(b.delivered, s.delivered);
    EXPECT_EQ(b.generator, s.generator) << "a full 64-bit generator state must survive";
    EXPECT_EQ(b.base_seed, s.base_seed);
    EXPECT_EQ(b.num_workers, s.num_workers);
    EXPECT_EQ(b.done, s.done);
    EXPECT_EQ(b.last_worker, s.last_worker);
    EXPECT_SAME(b.rng, s.rng);
    EXPECT_SAME(b.stream, s.stream);
    EXPECT_EQ(EncodeLoaderState(b), text);
    if (::testing::Test::HasFailure()) break;  // one broken state is enough to show
  }
}

TEST(State, DecodeNamesTheLineAndTheKey) {
  CaseRandom rng;
  LoaderState s;
  s.epoch = rng.Int(0, 20);
  s.num_workers = static_cast<int>(rng.Int(1, 4));
  for (int w = 0; w < s.num_workers; ++w) s.rng.push_back(static_cast<uint64_t>(rng.Int(0, 1000000)));
  const std::string good = EncodeLoaderState(s);
  SCOPED_TRACE(Drawn(Describe(s)));
  auto with_line = [&](int line, const std::string& replacement) {
    std::vector<std::string> lines;
    size_t from = 0;
    for (size_t to; (to = good.find('\n', from)) != std::string::npos; from = to + 1) {
      lines.push_back(good.substr(from, to - from));
    }
    lines[static_cast<size_t>(line - 1)] = replacement;
    std::string out;
    for (const std::string& l : lines) out += l + "\n";
    auto r = DecodeLoaderState(out);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << "line " << line << ": " << replacement;
    return std::string(r.status().message());
  };
  const std::string digits = std::to_string(rng.Int(0, 999));
  EXPECT_THAT(with_line(1, "distlab-loader-state " + std::to_string(rng.Int(2, 9))), HasSubstr("line 1"));
  EXPECT_THAT(with_line(3, "delivered " + digits + rng.Pick(std::vector<std::string>{"x", ".5", "-", "e"})),
              HasSubstr("line 3 (delivered)"));
  EXPECT_THAT(with_line(4, rng.Pick(std::vector<std::string>{"generatr", "Generator", "gen"}) + " " + digits),
              HasSubstr("line 4 (generator)"));
  // An rng list one value short of its count, and one whose count is not max(1, W).
  const int W = s.num_workers;
  std::string short_list = "rng " + std::to_string(W);
  for (int w = 0; w + 1 < W; ++w) short_list += " " + std::to_string(s.rng[static_cast<size_t>(w)]);
  EXPECT_THAT(with_line(9, short_list), HasSubstr("line 9 (rng)"));
  std::string long_list = "rng " + std::to_string(W + 1);
  for (int w = 0; w <= W; ++w) long_list += " " + std::to_string(rng.Int(0, 1000));
  EXPECT_THAT(with_line(9, long_list), HasSubstr("rng"));
  EXPECT_THAT(with_line(7, "done " + std::to_string(rng.Int(2, 9))), HasSubstr("line 7 (done)"));
  EXPECT_EQ(DecodeLoaderState("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeLoaderState(good + "extra " + digits + "\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(State, EpochSeedsComeFromTheGeneratorWorkerSeedsAddTheId) {
  CaseRandom rng;
  const uint64_t start = rng.Next();
  SCOPED_TRACE(Drawn(Str("generator ", start)));
  uint64_t g = start;
  std::set<uint64_t> bases;
  for (int e = 0; e < 5; ++e) {
    uint64_t copy = start + static_cast<uint64_t>(e) * 0x9E3779B97F4A7C15ULL;
    const uint64_t want = SplitMix64(&copy);
    EXPECT_EQ(EpochBaseSeed(&g), want) << "epoch " << e << ": one SplitMix64 draw from the generator";
    EXPECT_EQ(g, copy) << "epoch " << e << ": one draw per epoch";
    bases.insert(want);
  }
  EXPECT_EQ(bases.size(), 5u);
  const uint64_t base = rng.Next();
  for (int w = 0; w < 8; ++w) {
    EXPECT_EQ(WorkerSeed(base, w), base + static_cast<uint64_t>(w)) << "base " << base << ", worker " << w;
  }
}

// Every (R, W, n) of a small grid, and some larger drawn ones: each rank reads the same count floor(n / R),
// the grid reads [start, start + R*floor(n/R)) exactly once, and the n mod R samples after it not at all.
TEST(State, GridShardReadsEverySampleOnceButTheDroppedTail) {
  CaseRandom rng;
  const int64_t start = rng.Int(0, 1000);
  std::vector<std::tuple<int, int, int64_t>> grid;
  for (int R = 1; R <= 4; ++R) {
    for (int W = 1; W <= 3; ++W) {
      for (int64_t n = 0; n <= 23; ++n) grid.emplace_back(R, W, n);
    }
  }
  for (int k = 0; k < 20; ++k) {
    const int R = static_cast<int>(rng.Int(1, 8)), W = static_cast<int>(rng.Int(1, 6));
    grid.emplace_back(R, W, rng.Int(0, 200));
  }
  for (const auto& [R, W, n] : grid) {
    SCOPED_TRACE(Drawn(Str("[", start, ", ", start + n, ") on ", R, " ranks x ", W, " workers")));
    const int64_t end = start + n;
    std::map<int64_t, int> seen;
    bool ok = true;
    for (int r = 0; r < R && ok; ++r) {
      int64_t rank_count = 0, next = -1;
      for (int w = 0; w < W; ++w) {
        auto [lo, hi] = GridShard(start, end, r, R, w, W);
        ASSERT_LE(lo, hi) << "rank " << r << ", worker " << w;
        if (lo < hi && next >= 0 && lo != next) {
          ADD_FAILURE() << "rank " << r << ", worker " << w << " starts at " << lo << ", not where worker "
                        << w - 1 << " ended (" << next << "): a rank's workers read contiguous parts";
          ok = false;
        }
        if (lo < hi) next = hi;
        for (int64_t i = lo; i < hi; ++i) ++seen[i];
        rank_count += hi - lo;
      }
      if (rank_count != n / R) {
        ADD_FAILURE() << "rank " << r << " reads " << rank_count
                      << " samples, every rank must read floor(n / R) = " << n / R;
        ok = false;
      }
    }
    for (int64_t i = start; i < end && ok; ++i) {
      const int want = i < start + R * (n / R) ? 1 : 0;
      if (seen[i] != want) {
        ADD_FAILURE() << "sample " << i << " is read " << seen[i] << " times, expected " << want;
        ok = false;
      }
    }
    if (!ok) break;  // one broken grid is enough to show
  }
  const int R = static_cast<int>(rng.Int(1, 5));
  EXPECT_EQ(GridShard(0, 10, R, R, 0, 2).first, GridShard(0, 10, R, R, 0, 2).second)
      << "rank " << R << " of " << R << " is out of range: an empty range";
}

// Reference: MegatronPretrainingSampler from consumed samples (state.h).
std::vector<V> RefMegatron(int64_t total, int64_t consumed, int64_t mb, int r, int R, int64_t count) {
  std::vector<V> out;
  for (int64_t chunk = consumed; chunk + mb * R <= total && static_cast<int64_t>(out.size()) < count;
       chunk += mb * R) {
    V mine;
    for (int64_t i = chunk + r * mb; i < chunk + (r + 1) * mb; ++i) mine.push_back(i);
    out.push_back(mine);
  }
  return out;
}

TEST(State, MegatronSamplerFromConsumedSamples) {
  CaseRandom rng;
  for (int trial = 0; trial < 6; ++trial) {
    const int R = static_cast<int>(rng.Int(1, 4)), r = static_cast<int>(rng.Int(0, R - 1));
    const int64_t mb = rng.Int(1, 4), total = rng.Int(0, 60), consumed = rng.Int(0, total),
                  count = rng.Int(1, 20);
    SCOPED_TRACE(Drawn(Str("total ", total, ", consumed ", consumed, ", micro-batch ", mb, ", rank ", r,
                           " of ", R, ", count ", count)));
    ASSERT_OK_AND_ASSIGN(auto got, MegatronMicroBatches(total, consumed, mb, r, R, count));
    EXPECT_SAME(got, RefMegatron(total, consumed, mb, r, R, count))
        << "chunks of mb * R from consumed on, rank r's slice of each, the partial chunk dropped";
  }
  // Resuming from consumed = k * mb * R gives what an uninterrupted run gives from its k-th step on.
  const int R = static_cast<int>(rng.Int(2, 4)), r = static_cast<int>(rng.Int(0, R - 1));
  const int64_t mb = rng.Int(1, 3), total = rng.Int(20, 60);
  SCOPED_TRACE(Drawn(Str("total ", total, ", micro-batch ", mb, ", rank ", r, " of ", R)));
  ASSERT_OK_AND_ASSIGN(auto all, MegatronMicroBatches(total, 0, mb, r, R, 100));
  for (int64_t k = 0; k <= static_cast<int64_t>(all.size()); ++k) {
    ASSERT_OK_AND_ASSIGN(auto rest, MegatronMicroBatches(total, k * mb * R, mb, r, R, 100));
    EXPECT_SAME(rest, std::vector<V>(all.begin() + k, all.end())) << "resume after step " << k;
  }
  // Errors: consumed > total, mb < 1, R < 1, r outside [0, R).
  const int64_t over = total + rng.Int(1, 10);
  EXPECT_EQ(MegatronMicroBatches(total, over, mb, r, R, 1).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "consumed " << over;
  EXPECT_EQ(MegatronMicroBatches(total, 0, -rng.Int(0, 3), r, R, 1).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "micro-batch < 1";
  EXPECT_EQ(MegatronMicroBatches(total, 0, mb, 0, -static_cast<int>(rng.Int(0, 3)), 1).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "R < 1";
  const int bad_rank =
      rng.Chance(0.5) ? R + static_cast<int>(rng.Int(0, 3)) : -static_cast<int>(rng.Int(1, 3));
  EXPECT_EQ(MegatronMicroBatches(total, 0, mb, bad_rank, R, 1).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "rank " << bad_rank << " of " << R;
}

TEST(SamplerState, RandomAndDistributedSamplersRepeatTheirPass) {
  CaseRandom rng;
  {
    const int64_t n = rng.Int(5, 30), num = rng.Int(1, 3 * n), passes = rng.Int(0, 5);
    const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
    SCOPED_TRACE(Drawn(
        Str("RandomSampler(n ", n, ", seed ", seed, ", num_samples ", num, ") after ", passes, " passes")));
    RandomSampler r(n, seed, false, num);
    for (int64_t p = 0; p < passes; ++p) r.Indices();
    EXPECT_EQ(r.state_dict().pass, passes);
    RandomSampler again(n, seed, false, num);
    ASSERT_OK(again.load_state_dict(r.state_dict()));
    EXPECT_SAME(again.Indices(), r.Indices()) << "the loaded sampler makes the pass the saved one would";
    EXPECT_EQ(again.load_state_dict(SamplerState{-rng.Int(1, 5)}).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    const int64_t n = rng.Int(5, 30), R = rng.Int(1, 4), rank = rng.Int(0, R - 1), epoch = rng.Int(0, 20);
    const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
    const bool drop = rng.Chance(0.5);
    SCOPED_TRACE(Drawn(Str("DistributedSampler(n ", n, ", rank ", rank, " of ", R, ", shuffle seed ", seed,
                           drop ? ", drop_last" : "", ") at epoch ", epoch)));
    ASSERT_OK_AND_ASSIGN(auto d, DistributedSampler::Create(n, R, rank, true, seed, drop));
    d->set_epoch(epoch);
    EXPECT_EQ(d->state_dict().pass, epoch);
    ASSERT_OK_AND_ASSIGN(auto d2, DistributedSampler::Create(n, R, rank, true, seed, drop));
    ASSERT_OK(d2->load_state_dict(d->state_dict()));
    EXPECT_SAME(d2->Indices(), d->Indices()) << "loading the state is set_epoch";
    EXPECT_EQ(d2->load_state_dict(SamplerState{-rng.Int(1, 5)}).code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace distlab::dataloader
