// Hidden tests, Lab 2 stage E, the pieces that do not fork: the checkpoint's text form, the seeds, rank x
// worker sharding, Megatron's consumed-samples sampler and the samplers' state. Expected values come from the
// formulas in state.h and sampler.h, computed here independently.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/sampler.h"
#include "labs/dataloader/state.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::HasSubstr;
using V = std::vector<int64_t>;

TEST(State, RoundTripsEveryField) {
  std::mt19937_64 rng(7);
  for (int it = 0; it < 200; ++it) {
    LoaderState s;
    s.epoch = static_cast<int64_t>(rng() % 50) - 1;
    s.delivered = static_cast<int64_t>(rng() % 1000);
    s.generator = rng();
    s.base_seed = rng();
    s.num_workers = static_cast<int>(rng() % 5);
    s.done = rng() % 2;
    s.last_worker = static_cast<int>(rng() % 6) - 1;
    const size_t readers = static_cast<size_t>(std::max(1, s.num_workers));
    if (rng() % 4 != 0) {
      for (size_t w = 0; w < readers; ++w) s.rng.push_back(rng());
    }
    if (rng() % 2) {
      for (size_t w = 0; w < readers; ++w) s.stream.push_back(static_cast<int64_t>(rng() % 100000));
    }
    const std::string text = EncodeLoaderState(s);
    ASSERT_OK_AND_ASSIGN(LoaderState b, DecodeLoaderState(text));
    EXPECT_EQ(b.epoch, s.epoch);
    EXPECT_EQ(b.delivered, s.delivered);
    EXPECT_EQ(b.generator, s.generator) << "a full 64-bit generator state must survive";
    EXPECT_EQ(b.base_seed, s.base_seed);
    EXPECT_EQ(b.num_workers, s.num_workers);
    EXPECT_EQ(b.done, s.done);
    EXPECT_EQ(b.last_worker, s.last_worker);
    EXPECT_EQ(b.rng, s.rng);
    EXPECT_EQ(b.stream, s.stream);
    EXPECT_EQ(EncodeLoaderState(b), text);
  }
}

TEST(State, DecodeNamesTheLineAndTheKey) {
  LoaderState s;
  s.epoch = 1;
  s.num_workers = 2;
  s.rng = {5, 6};
  const std::string good = EncodeLoaderState(s);
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
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << replacement;
    return std::string(r.status().message());
  };
  EXPECT_THAT(with_line(1, "distlab-loader-state 2"), HasSubstr("line 1"));
  EXPECT_THAT(with_line(3, "delivered 1x"), HasSubstr("line 3 (delivered)"));
  EXPECT_THAT(with_line(4, "generatr 1"), HasSubstr("line 4 (generator)"));
  EXPECT_THAT(with_line(9, "rng 2 5"), HasSubstr("line 9 (rng)"));
  EXPECT_THAT(with_line(9, "rng 3 5 6 7"), HasSubstr("rng"));
  EXPECT_THAT(with_line(7, "done 2"), HasSubstr("line 7 (done)"));
  EXPECT_EQ(DecodeLoaderState("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeLoaderState(good + "extra 1\n").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(State, EpochSeedsComeFromTheGeneratorWorkerSeedsAddTheId) {
  uint64_t g = 2024;
  std::set<uint64_t> bases;
  for (int e = 0; e < 5; ++e) {
    uint64_t expect_state = 2024 + static_cast<uint64_t>(e) * 0x9E3779B97F4A7C15ULL, copy = expect_state;
    const uint64_t want = SplitMix64(&copy);
    EXPECT_EQ(EpochBaseSeed(&g), want) << "epoch " << e;
    EXPECT_EQ(g, copy) << "one draw per epoch";
    bases.insert(want);
  }
  EXPECT_EQ(bases.size(), 5u);
  for (int w = 0; w < 4; ++w) EXPECT_EQ(WorkerSeed(1000, w), 1000u + static_cast<uint64_t>(w));
}

// Every (R, W, n): each rank reads the same count floor(n / R), the grid reads [start, start + R*floor(n/R))
// exactly once, and the n mod R samples after it not at all.
TEST(State, GridShardReadsEverySampleOnceButTheDroppedTail) {
  for (int R = 1; R <= 4; ++R) {
    for (int W = 1; W <= 3; ++W) {
      for (int64_t n = 0; n <= 23; ++n) {
        const int64_t start = 5, end = start + n;
        std::map<int64_t, int> seen;
        for (int r = 0; r < R; ++r) {
          int64_t rank_count = 0, next = -1;
          for (int w = 0; w < W; ++w) {
            auto [lo, hi] = GridShard(start, end, r, R, w, W);
            ASSERT_LE(lo, hi);
            if (lo < hi && next >= 0) {
              EXPECT_EQ(lo, next) << "a rank's workers read contiguous parts";
            }
            if (lo < hi) next = hi;
            for (int64_t i = lo; i < hi; ++i) ++seen[i];
            rank_count += hi - lo;
          }
          EXPECT_EQ(rank_count, n / R) << "R " << R << " W " << W << " n " << n << " rank " << r;
        }
        for (int64_t i = start; i < end; ++i) {
          const int want = i < start + R * (n / R) ? 1 : 0;
          EXPECT_EQ(seen[i], want) << "sample " << i << " with R " << R << " W " << W << " n " << n;
        }
      }
    }
  }
  EXPECT_EQ(GridShard(0, 10, 3, 3, 0, 2).first, GridShard(0, 10, 3, 3, 0, 2).second) << "rank out of range";
}

TEST(State, MegatronSamplerFromConsumedSamples) {
  // 20 samples, mb 3, R 2: global batches [0, 6), [6, 12), [12, 18); [18, 20) is dropped.
  ASSERT_OK_AND_ASSIGN(auto r1, MegatronMicroBatches(20, 0, 3, 1, 2, 100));
  EXPECT_EQ(r1, (std::vector<V>{{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}));
  ASSERT_OK_AND_ASSIGN(auto from6, MegatronMicroBatches(20, 6, 3, 0, 2, 1));
  EXPECT_EQ(from6, (std::vector<V>{{6, 7, 8}}));
  ASSERT_OK_AND_ASSIGN(auto none, MegatronMicroBatches(20, 20, 3, 0, 2, 5));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(MegatronMicroBatches(20, 21, 3, 0, 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MegatronMicroBatches(20, 0, 3, 2, 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
  // Resuming from consumed = k * mb * R gives what an uninterrupted run gives from its k-th step on.
  ASSERT_OK_AND_ASSIGN(auto all, MegatronMicroBatches(50, 0, 2, 1, 3, 100));
  for (int64_t k = 0; k <= static_cast<int64_t>(all.size()); ++k) {
    ASSERT_OK_AND_ASSIGN(auto rest, MegatronMicroBatches(50, k * 2 * 3, 2, 1, 3, 100));
    EXPECT_EQ(rest, std::vector<V>(all.begin() + k, all.end())) << "resume after step " << k;
  }
}

TEST(SamplerState, RandomAndDistributedSamplersRepeatTheirPass) {
  RandomSampler r(13, 3, false, 20);
  r.Indices();
  r.Indices();
  EXPECT_EQ(r.state_dict().pass, 2);
  RandomSampler again(13, 3, false, 20);
  ASSERT_OK(again.load_state_dict(r.state_dict()));
  EXPECT_EQ(again.Indices(), r.Indices());
  EXPECT_EQ(again.load_state_dict(SamplerState{-1}).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_OK_AND_ASSIGN(auto d, DistributedSampler::Create(17, 3, 1, true, 8, false));
  d->set_epoch(4);
  EXPECT_EQ(d->state_dict().pass, 4);
  ASSERT_OK_AND_ASSIGN(auto d2, DistributedSampler::Create(17, 3, 1, true, 8, false));
  ASSERT_OK(d2->load_state_dict(d->state_dict()));
  EXPECT_EQ(d2->Indices(), d->Indices());
  EXPECT_EQ(d2->load_state_dict(SamplerState{-2}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::dataloader
