// Hidden tests of Lab 7 stage D: ZeRO-3 inside pipeline stages -- equal to single-rank training in both
// modes, and the conflict measured: reshard pays 3m collectives per unit, keep-gathered pays 2 but holds the
// whole stage (notes/07-composition.md section 5). Every case draws the layout among those of 4 ranks with
// dp > 1, the micro-batch count and the seeds of the model and of the data from the grading seed.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>

#include "gtest/gtest.h"
#include "labs/composition/fsdp_pipeline.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using tensor::MemCategory;
using testing::Again;
using testing::CaseRandom;
using testing::RankRun;
using testing::Training;

constexpr uint64_t e = 4;

// Per stage p of D replicas: the units' Psi_u and S_u = ceil(Psi_u / D) (untied).
struct StageSizes {
  std::vector<int64_t> psi, shard;
  int64_t sum_shard() const { return std::accumulate(shard.begin(), shard.end(), int64_t{0}); }
  int64_t sum_psi() const { return std::accumulate(psi.begin(), psi.end(), int64_t{0}); }
  int64_t max_shard() const { return *std::max_element(shard.begin(), shard.end()); }
  int64_t max_psi() const { return *std::max_element(psi.begin(), psi.end()); }
};

StageSizes Sizes(const nn::GptConfig& cfg, const GridShape& g, int p) {
  StageSizes s;
  const int64_t h = cfg.hidden, V = cfg.vocab;
  if (p == 0) s.psi.push_back(V * h + cfg.seq * h);
  for (int l = 0; l < cfg.layers / g.pp; ++l) s.psi.push_back(nn::BlockParameters(cfg, g.tp));
  if (p == g.pp - 1) s.psi.push_back(2 * h + V * h);
  for (int64_t x : s.psi) s.shard.push_back((x + g.dp - 1) / g.dp);
  return s;
}

const std::vector<RankRun>& Runs(const Training& t) {
  static std::map<std::string, std::vector<RankRun>> cache;
  const std::string key = t.Label();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto runs = testing::RunLayout(t);
  EXPECT_OK(runs.status()) << key << Again();
  if (!runs.ok()) runs = std::vector<RankRun>();
  return cache.emplace(key, std::move(*runs)).first->second;
}

// The layouts of 4 ranks with dp > 1 (ZeRO-3 shards over dp): (2, 1, 2), (2, 2, 1), (4, 1, 1).
std::vector<GridShape> ShardedGrids() {
  std::vector<GridShape> out;
  for (const GridShape& g : testing::ShapesOf(4)) {
    if (g.dp > 1) out.push_back(g);
  }
  return out;
}

// A training of 4 ranks with dp > 1 in mode `mode`, the grid drawn among ShardedGrids, m among the counts of
// `ms` that B = 8 allows on it (all of them when `ms` is empty), the seeds drawn.
Training Draw(CaseRandom& rng, DpSharding mode, std::vector<int> ms = {}) {
  Training t;
  const GridShape grid = rng.Pick(ShardedGrids());
  std::vector<int> allowed;
  for (int m : testing::MicroBatchesOf(grid)) {
    if (ms.empty() || std::find(ms.begin(), ms.end(), m) != ms.end()) allowed.push_back(m);
  }
  t.layout = {grid, rng.Pick(allowed), mode};
  testing::DrawSeeds(rng, &t);
  return t;
}

void ExpectEqualsSingleRank(const Training& t) {
  const std::vector<RankRun>& runs = Runs(t);
  ASSERT_EQ(runs.size(), static_cast<size_t>(t.layout.grid.world()))
      << t.Label() << ": the run failed" << Again();
  testing::ExpectEquivalent(t, runs, 2e-5f);
}

// m >= 2: the micro-batches' gradients add up in the shards.
TEST(FsdpPipelineHidden, Zero3ReshardEqualsSingleRank) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, DpSharding::kZero3Reshard, {2, 4}));
}

TEST(FsdpPipelineHidden, Zero3KeepGatheredEqualsSingleRank) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, DpSharding::kZero3KeepGathered, {2, 4}));
}

// dp traffic of one step, every rank, for every m the drawn grid allows: per unit, `gathers` all-gathers and
// `scatters` reduce-scatters, each of the unit's whole padded flat vector 4 D S_u.
void ExpectDpTraffic(CaseRandom& rng, DpSharding mode, const char* rule, int gathers_per_m,
                     int scatters_per_m, int gathers, int scatters) {
  Training t = Draw(rng, mode);
  for (int m : testing::MicroBatchesOf(t.layout.grid)) {
    t.layout.micro_batches = m;
    const std::vector<RankRun>& runs = Runs(t);
    ASSERT_EQ(runs.size(), 4u) << t.Label() << ": the run failed" << Again();
    const int D = t.layout.grid.dp;
    for (size_t r = 0; r < runs.size(); ++r) {
      const StageSizes s = Sizes(t.cfg, t.layout.grid, runs[r].coord.pp);
      const Traffic& dp = runs[r].ledger.of(Axis::kDp);
      const uint64_t u = s.psi.size(), bytes = e * D * s.sum_shard();
      const uint64_t ag = gathers_per_m * m + gathers, rs = scatters_per_m * m + scatters;
      const std::string on = t.Label() + ", rank " + std::to_string(r) + " (stage " +
                             std::to_string(runs[r].coord.pp) + ", " + std::to_string(u) +
                             " units): " + rule + "; the dp comm carried " + dp.ToString();
      EXPECT_EQ(dp.calls, (ag + rs) * u) << on << ": its calls differ" << Again();
      EXPECT_EQ(dp.all_gather, ag * bytes) << on << ": its all-gather bytes differ" << Again();
      EXPECT_EQ(dp.reduce_scatter, rs * bytes) << on << ": its reduce-scatter bytes differ" << Again();
      EXPECT_EQ(dp.all_reduce + dp.other, 0u)
          << on << ": nothing but all-gathers and reduce-scatters" << Again();
    }
  }
}

TEST(FsdpPipelineHidden, ReshardGathersEveryMicroBatch) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectDpTraffic(rng, DpSharding::kZero3Reshard, "reshard is 2m all-gathers and m reduce-scatters per unit",
                  2, 1, 0, 0);
}

TEST(FsdpPipelineHidden, KeepGatheredReducesOnce) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectDpTraffic(rng, DpSharding::kZero3KeepGathered,
                  "keep-gathered is 1 all-gather and 1 reduce-scatter per unit", 0, 0, 1, 1);
}

// After a step every mode holds 16 bytes per shard element (ZeRO-3) or 8 Psi_s + 8 S_s (ZeRO-1); during
// the step reshard holds at most one unit gathered, keep holds the whole stage. One drawn grid and m.
TEST(FsdpPipelineHidden, MemoryOfTheThreeModes) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  Training t = Draw(rng, DpSharding::kZero1);
  for (DpSharding mode : {DpSharding::kZero1, DpSharding::kZero3Reshard, DpSharding::kZero3KeepGathered}) {
    t.layout.sharding = mode;
    const std::vector<RankRun>& runs = Runs(t);
    ASSERT_EQ(runs.size(), 4u) << t.Label() << ": the run failed" << Again();
    const int64_t D = t.layout.grid.dp;
    for (size_t r = 0; r < runs.size(); ++r) {
      const StageSizes s = Sizes(t.cfg, t.layout.grid, runs[r].coord.pp);
      const MemoryUse& mem = runs[r].ledger.memory;
      const std::string where = t.Label() + ", rank " + std::to_string(r) + " (stage " +
                                std::to_string(runs[r].coord.pp) + ", " + std::to_string(s.psi.size()) +
                                " units): ";
      const uint64_t shards = e * s.sum_shard(), full = e * s.sum_psi();
      std::printf("%s: params %zu (peak %zu), grads %zu (peak %zu), optimizer %zu\n", where.c_str(),
                  mem.current_of(MemCategory::kParameters), mem.peak_of(MemCategory::kParameters),
                  mem.current_of(MemCategory::kGradients), mem.peak_of(MemCategory::kGradients),
                  mem.current_of(MemCategory::kOptimizerState));
      EXPECT_EQ(mem.current_of(MemCategory::kCommBuffers), 0u)
          << where << "communication buffers left after a step" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kActivations), 0u)
          << where << "activations left after a step" << Again();
      if (mode == DpSharding::kZero1) {
        const uint64_t shard = e * ((s.sum_psi() + D - 1) / D);
        EXPECT_EQ(mem.current_of(MemCategory::kParameters), full)
            << where << "parameter bytes after a step (4 Psi_s)" << Again();
        EXPECT_EQ(mem.current_of(MemCategory::kGradients), full)
            << where << "gradient bytes after a step (4 Psi_s)" << Again();
        EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), 2 * shard)
            << where << "optimizer bytes after a step (8 ceil(Psi_s / D))" << Again();
        EXPECT_EQ(mem.peak_of(MemCategory::kParameters), full)
            << where << "the parameters' peak (ZeRO-1 never gathers more)" << Again();
        continue;
      }
      EXPECT_EQ(mem.current_of(MemCategory::kParameters), shards)
          << where << "parameter bytes after a step (4 sum_u S_u)" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kGradients), shards)
          << where << "gradient bytes after a step (4 sum_u S_u)" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), 2 * shards)
          << where << "optimizer bytes after a step (8 sum_u S_u)" << Again();
      if (mode == DpSharding::kZero3Reshard) {
        const uint64_t bound = shards + e * D * s.max_shard();
        EXPECT_GE(mem.peak_of(MemCategory::kParameters), shards + e * s.max_psi())
            << where << "the parameters' peak is below the shards plus the largest unit gathered" << Again();
        EXPECT_LE(mem.peak_of(MemCategory::kParameters), bound)
            << where << "the parameters' peak is above the shards plus one unit gathered" << Again();
        EXPECT_LE(mem.peak_of(MemCategory::kGradients), bound)
            << where << "the gradients' peak is above the shards plus one unit's gradients" << Again();
      } else {
        EXPECT_GE(mem.peak_of(MemCategory::kParameters), shards + full)
            << where << "the parameters' peak is below the shards plus the whole stage gathered" << Again();
        EXPECT_GE(mem.peak_of(MemCategory::kGradients), shards + full)
            << where << "the gradients' peak is below the shards plus the whole stage's gradients" << Again();
      }
    }
  }
}

// The conflict in one number: per step, ZeRO-3 resharding moves 3m/2 times the dp payload of ZeRO-1 (the
// test model's units divide by D = 2 and 4, so there is no padding): 2 RS+AG of 4 D S_s against 3m
// collectives of 4 D S_u. One drawn grid and m.
TEST(FsdpPipelineHidden, ConflictRatioIsThreeMOverTwo) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  Training z1 = Draw(rng, DpSharding::kZero1);
  Training z3 = z1;
  z3.layout.sharding = DpSharding::kZero3Reshard;
  const int m = z1.layout.micro_batches;
  const auto& a = Runs(z1);
  const auto& b = Runs(z3);
  ASSERT_EQ(a.size(), 4u) << z1.Label() << ": the run failed" << Again();
  ASSERT_EQ(b.size(), 4u) << z3.Label() << ": the run failed" << Again();
  for (size_t r = 0; r < 4; ++r) {
    for (int64_t psi : Sizes(z1.cfg, z1.layout.grid, a[r].coord.pp).psi) {
      ASSERT_EQ(psi % z1.layout.grid.dp, 0) << "a unit of " << psi << " parameters pads";
    }
    const double ratio = static_cast<double>(b[r].ledger.of(Axis::kDp).payload()) /
                         static_cast<double>(a[r].ledger.of(Axis::kDp).payload());
    std::printf("rank %zu: reshard / zero1 dp payload = %.4f (3m/2 = %.1f)\n", r, ratio, 1.5 * m);
    EXPECT_DOUBLE_EQ(ratio, 1.5 * m)
        << z1.Label() << ", rank " << r
        << ": the dp payload of a step under zero3-reshard over the one under zero1" << Again();
  }
}

// Tied embeddings with either ZeRO-3 sharding on a drawn grid of 2 to 4 ranks: InvalidArgument.
TEST(FsdpPipelineHidden, TiedWithZero3IsAnError) {
  CaseRandom rng;
  std::vector<GridShape> grids;
  for (int world : {2, 3, 4}) {
    for (const GridShape& g : testing::ShapesOf(world)) grids.push_back(g);
  }
  const GridShape grid = rng.Pick(grids);
  auto statuses = comm::RunRanks(
      grid.world(),
      [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto g = ProcessGrid::Create(world, grid);
        if (!g.ok()) return g.status();
        nn::GptConfig cfg;
        cfg.tie_embeddings = true;
        for (DpSharding mode : {DpSharding::kZero3Reshard, DpSharding::kZero3KeepGathered}) {
          auto t = Trainer3D::Create(**g, stream, cfg, {grid, 1, mode}, 8, testing::Adam());
          EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
              << "rank " << rank << " of " << testing::Str(grid) << ": Create with tied embeddings and "
              << Name(mode) << Again();
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << testing::Str(grid) << Again();
}

}  // namespace
}  // namespace distlab::composition
