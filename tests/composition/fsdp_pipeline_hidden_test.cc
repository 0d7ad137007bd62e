// Hidden tests of Lab 7 stage D: ZeRO-3 inside pipeline stages -- equal to single-rank training in both
// modes, and the conflict measured: reshard pays 3m collectives per unit, keep-gathered pays 2 but holds the
// whole stage (notes/07-composition.md section 5).
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
using testing::RankRun;
using testing::RunLayout;

constexpr uint64_t e = 4;

// Per stage p of D replicas: the units' Psi_u and S_u = ceil(Psi_u / D) (untied, tp 1).
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

const std::vector<RankRun>& Runs(const Layout& layout) {
  static std::map<std::string, std::vector<RankRun>> cache;
  const std::string key = std::string(Name(layout.sharding)) + " m" + std::to_string(layout.micro_batches) +
                          " dp" + std::to_string(layout.grid.dp);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto runs = RunLayout(nn::GptConfig{}, layout);
  EXPECT_OK(runs.status()) << key;
  if (!runs.ok()) runs = std::vector<RankRun>();
  return cache.emplace(key, std::move(*runs)).first->second;
}

void ExpectEqualsSingleRank(const Layout& layout) {
  const std::vector<RankRun>& runs = Runs(layout);
  ASSERT_EQ(runs.size(), static_cast<size_t>(layout.grid.world()));
  const testing::Equivalence eq = testing::Compare(nn::GptConfig{}, layout, runs);
  std::printf("%s, m %d: max |dloss| %.3g, max |dparam| %.3g\n", Name(layout.sharding), layout.micro_batches,
              eq.max_dloss, eq.max_dparam);
  EXPECT_LE(eq.max_dloss, 2e-5f);
  EXPECT_LE(eq.max_dparam, 2e-5f) << "worst: " << eq.worst;
}

TEST(FsdpPipelineHidden, Zero3ReshardEqualsSingleRank) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{2, 2, 1}, 2, DpSharding::kZero3Reshard});
}

TEST(FsdpPipelineHidden, Zero3KeepGatheredEqualsSingleRank) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{2, 2, 1}, 2, DpSharding::kZero3KeepGathered});
}

// dp traffic of one step, every rank: reshard 2m all-gathers and m reduce-scatters per unit, each of the
// unit's whole padded flat vector 4 D S_u.
TEST(FsdpPipelineHidden, ReshardGathersEveryMicroBatch) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  for (int m : {1, 2, 4}) {
    const Layout layout{{2, 2, 1}, m, DpSharding::kZero3Reshard};
    const std::vector<RankRun>& runs = Runs(layout);
    ASSERT_EQ(runs.size(), 4u) << "m " << m;
    for (const RankRun& r : runs) {
      const StageSizes s = Sizes(nn::GptConfig{}, layout.grid, r.coord.pp);
      const Traffic& dp = r.ledger.of(Axis::kDp);
      const uint64_t u = s.psi.size(), bytes = e * 2 * s.sum_shard();
      EXPECT_EQ(dp.calls, 3 * m * u) << "m " << m << ", stage " << r.coord.pp;
      EXPECT_EQ(dp.all_gather, 2 * m * bytes) << "m " << m << ", stage " << r.coord.pp;
      EXPECT_EQ(dp.reduce_scatter, m * bytes) << "m " << m << ", stage " << r.coord.pp;
      EXPECT_EQ(dp.all_reduce + dp.other, 0u);
    }
  }
}

TEST(FsdpPipelineHidden, KeepGatheredReducesOnce) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  for (int m : {1, 2, 4}) {
    const Layout layout{{2, 2, 1}, m, DpSharding::kZero3KeepGathered};
    const std::vector<RankRun>& runs = Runs(layout);
    ASSERT_EQ(runs.size(), 4u) << "m " << m;
    for (const RankRun& r : runs) {
      const StageSizes s = Sizes(nn::GptConfig{}, layout.grid, r.coord.pp);
      const Traffic& dp = r.ledger.of(Axis::kDp);
      const uint64_t u = s.psi.size(), bytes = e * 2 * s.sum_shard();
      EXPECT_EQ(dp.calls, 2 * u) << "m " << m << ", stage " << r.coord.pp;
      EXPECT_EQ(dp.all_gather, bytes) << "m " << m;
      EXPECT_EQ(dp.reduce_scatter, bytes) << "m " << m;
    }
  }
}

// After a step every mode holds 16 bytes per shard element (ZeRO-3) or 8 Psi_s + 8 S_s (ZeRO-1); during
// the step reshard holds at most one unit gathered, keep holds the whole stage.
TEST(FsdpPipelineHidden, MemoryOfTheThreeModes) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  for (DpSharding mode : {DpSharding::kZero1, DpSharding::kZero3Reshard, DpSharding::kZero3KeepGathered}) {
    const Layout layout{{2, 2, 1}, 2, mode};
    const std::vector<RankRun>& runs = Runs(layout);
    ASSERT_EQ(runs.size(), 4u) << Name(mode);
    for (const RankRun& r : runs) {
      const StageSizes s = Sizes(nn::GptConfig{}, layout.grid, r.coord.pp);
      const MemoryUse& mem = r.ledger.memory;
      const std::string where = std::string(Name(mode)) + ", stage " + std::to_string(r.coord.pp);
      const uint64_t shards = e * s.sum_shard(), full = e * s.sum_psi();
      std::printf("%s: params %zu (peak %zu), grads %zu (peak %zu), optimizer %zu\n", where.c_str(),
                  mem.current_of(MemCategory::kParameters), mem.peak_of(MemCategory::kParameters),
                  mem.current_of(MemCategory::kGradients), mem.peak_of(MemCategory::kGradients),
                  mem.current_of(MemCategory::kOptimizerState));
      EXPECT_EQ(mem.current_of(MemCategory::kCommBuffers), 0u) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kActivations), 0u) << where;
      if (mode == DpSharding::kZero1) {
        const uint64_t shard = e * ((s.sum_psi() + 1) / 2);
        EXPECT_EQ(mem.current_of(MemCategory::kParameters), full) << where;
        EXPECT_EQ(mem.current_of(MemCategory::kGradients), full) << where;
        EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), 2 * shard) << where;
        EXPECT_EQ(mem.peak_of(MemCategory::kParameters), full) << where;
        continue;
      }
      EXPECT_EQ(mem.current_of(MemCategory::kParameters), shards) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kGradients), shards) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), 2 * shards) << where;
      if (mode == DpSharding::kZero3Reshard) {
        const uint64_t bound = shards + e * 2 * s.max_shard();
        EXPECT_GE(mem.peak_of(MemCategory::kParameters), shards + e * s.max_psi()) << where;
        EXPECT_LE(mem.peak_of(MemCategory::kParameters), bound) << where << ": more than one unit gathered";
        EXPECT_LE(mem.peak_of(MemCategory::kGradients), bound) << where << ": more than one unit's gradients";
      } else {
        EXPECT_GE(mem.peak_of(MemCategory::kParameters), shards + full) << where << ": the stage is gathered";
        EXPECT_GE(mem.peak_of(MemCategory::kGradients), shards + full) << where;
      }
    }
  }
}

// The conflict in one number: per step, ZeRO-3 resharding moves 3m/2 times the dp payload of ZeRO-1 (sizes
// here divide by D = 2, so there is no padding): 2 RS+AG of 4 D S_s against 3m collectives of 4 D S_u.
TEST(FsdpPipelineHidden, ConflictRatioIsThreeMOverTwo) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const int m = 4;
  const auto& z1 = Runs({{2, 2, 1}, m, DpSharding::kZero1});
  const auto& z3 = Runs({{2, 2, 1}, m, DpSharding::kZero3Reshard});
  ASSERT_EQ(z1.size(), 4u);
  ASSERT_EQ(z3.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    const double ratio = static_cast<double>(z3[r].ledger.of(Axis::kDp).payload()) /
                         static_cast<double>(z1[r].ledger.of(Axis::kDp).payload());
    std::printf("rank %zu: reshard / zero1 dp payload = %.4f (3m/2 = %.1f)\n", r, ratio, 1.5 * m);
    EXPECT_DOUBLE_EQ(ratio, 1.5 * m) << "rank " << r;
  }
}

TEST(FsdpPipelineHidden, TiedWithZero3IsAnError) {
  auto statuses = comm::RunRanks(
      2,
      [](int, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto grid = ProcessGrid::Create(world, {2, 1, 1});
        if (!grid.ok()) return grid.status();
        nn::GptConfig cfg;
        cfg.tie_embeddings = true;
        for (DpSharding mode : {DpSharding::kZero3Reshard, DpSharding::kZero3KeepGathered}) {
          auto t = Trainer3D::Create(**grid, stream, cfg, {{2, 1, 1}, 1, mode}, 8, testing::Adam());
          EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << Name(mode);
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::composition
