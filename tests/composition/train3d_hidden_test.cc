// Hidden tests of Lab 7 stage C: 3D training equals single-rank training, and its ledger equals the
// formulas (notes/07-composition.md section 4), axis by axis and kind by kind.
#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "labs/composition/train3d.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using tensor::MemCategory;
using testing::Compare;
using testing::RankRun;
using testing::RunLayout;

constexpr float kTolerance = 2e-5f;
constexpr uint64_t e = 4;  // bytes per f32

std::string Label(const Layout& l) {
  return "(dp " + std::to_string(l.grid.dp) + ", pp " + std::to_string(l.grid.pp) + ", tp " +
         std::to_string(l.grid.tp) + "), m " + std::to_string(l.micro_batches) + ", " + Name(l.sharding);
}

// One run per layout and configuration per process.
const std::vector<RankRun>& Runs(const nn::GptConfig& cfg, const Layout& layout) {
  static std::map<std::string, std::vector<RankRun>> cache;
  const std::string key = Label(layout) + (cfg.tie_embeddings ? " tied" : "");
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto runs = RunLayout(cfg, layout);
  EXPECT_OK(runs.status()) << key;
  if (!runs.ok()) runs = std::vector<RankRun>();
  return cache.emplace(key, std::move(*runs)).first->second;
}

void ExpectEqualsSingleRank(const Layout& layout, bool tied = false) {
  nn::GptConfig cfg;
  cfg.tie_embeddings = tied;
  const std::vector<RankRun>& runs = Runs(cfg, layout);
  ASSERT_EQ(runs.size(), static_cast<size_t>(layout.grid.world())) << "the run failed";
  const testing::Equivalence eq = Compare(cfg, layout, runs);
  std::printf("%s%s: max |dloss| %.3g, max |dparam| %.3g (%s)\n", Label(layout).c_str(), tied ? " tied" : "",
              eq.max_dloss, eq.max_dparam, eq.worst.c_str());
  EXPECT_LE(eq.max_dloss, kTolerance) << Label(layout);
  EXPECT_LE(eq.max_dparam, kTolerance) << Label(layout) << ", worst " << eq.worst;
}

TEST(Train3dHidden, EqualsSingleRankOnTwoByTwoByTwo) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{2, 2, 2}, 2});
}

TEST(Train3dHidden, EqualsSingleRankOnOneByFourByTwo) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{1, 4, 2}, 4});
}

TEST(Train3dHidden, EqualsSingleRankOnFourByTwoByOne) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{4, 2, 1}, 2});
}

TEST(Train3dHidden, EqualsSingleRankTensorOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{1, 1, 8}, 1});
}

TEST(Train3dHidden, EqualsSingleRankDataOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{8, 1, 1}, 1});
}

// m = 4 (every stage has a steady phase) and m = 2 (stages 0 and 1 go from warm-up straight to cool-down).
TEST(Train3dHidden, EqualsSingleRankPipelineOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  ExpectEqualsSingleRank({{1, 4, 1}, 4});
  ExpectEqualsSingleRank({{1, 4, 1}, 2});
}

// Tied embeddings over two stages: the copies stay equal to the dense wte (its gradient has both uses), and
// the emb comm carries one all-reduce of V h floats per step, on the first and the last stage only.
TEST(Train3dHidden, TiedEmbeddingsAcrossStages) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const Layout layout{{1, 2, 2}, 2};
  ExpectEqualsSingleRank(layout, /*tied=*/true);
  nn::GptConfig cfg;
  cfg.tie_embeddings = true;
  for (const RankRun& r : Runs(cfg, layout)) {
    const Traffic& emb = r.ledger.of(Axis::kEmb);
    EXPECT_EQ(emb.calls, 1u);
    EXPECT_EQ(emb.all_reduce, e * cfg.vocab * cfg.hidden);
    EXPECT_EQ(emb.payload(), emb.all_reduce);
    EXPECT_EQ(r.values.count("wte.weight"), 1u) << "both stages hold wte";
  }
}

// The formulas of the note, section 4, for one rank of stage p (f32, e = 4 bytes).
struct Expected {
  std::array<Traffic, kNumAxes> traffic;
  int64_t psi = 0, shard = 0;
};

Expected Formulas(const nn::GptConfig& cfg, const Layout& l, int p) {
  const int D = l.grid.dp, P = l.grid.pp, T = l.grid.tp, m = l.micro_batches;
  const int64_t h = cfg.hidden, V = cfg.vocab, s = cfg.seq, Ls = cfg.layers / P;
  const int64_t n = testing::kBatch / (D * m) * s;  // rows per micro-batch
  const uint64_t act = e * n * h;
  Expected x;
  x.psi = (p == 0 ? V * h + s * h : 0) + Ls * nn::BlockParameters(cfg, T) +
          (p == P - 1 ? 2 * h + (cfg.tie_embeddings && P == 1 ? 0 : V * h) : 0);
  x.shard = (x.psi + D - 1) / D;
  Traffic& tp = x.traffic[static_cast<int>(Axis::kTp)];
  if (T > 1) tp.calls = 4 * m * Ls, tp.all_reduce = 4 * m * Ls * act;
  Traffic& pp = x.traffic[static_cast<int>(Axis::kPp)];
  pp.sends = pp.recvs = m * ((p < P - 1 ? 1 : 0) + (p > 0 ? 1 : 0));
  pp.bytes_sent = pp.bytes_received = pp.sends * act;
  Traffic& dp = x.traffic[static_cast<int>(Axis::kDp)];
  if (D > 1) dp.calls = 2, dp.reduce_scatter = dp.all_gather = e * D * x.shard;
  Traffic& emb = x.traffic[static_cast<int>(Axis::kEmb)];
  if (cfg.tie_embeddings && P > 1 && (p == 0 || p == P - 1)) emb.calls = 1, emb.all_reduce = e * V * h;
  return x;
}

TEST(Train3dHidden, TrafficPerAxisMatchesTheFormulas) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const nn::GptConfig cfg;
  for (const Layout& layout : {Layout{{2, 2, 2}, 2}, Layout{{1, 4, 2}, 4}}) {
    const std::vector<RankRun>& runs = Runs(cfg, layout);
    ASSERT_EQ(runs.size(), 8u) << Label(layout);
    for (size_t r = 0; r < runs.size(); ++r) {
      const Expected x = Formulas(cfg, layout, runs[r].coord.pp);
      for (Axis a : kAllAxes) {
        EXPECT_TRUE(runs[r].ledger.of(a) == x.traffic[static_cast<int>(a)])
            << Label(layout) << ", rank " << r << ", axis " << Name(a) << ":\n  measured "
            << runs[r].ledger.of(a).ToString() << "\n  expected "
            << x.traffic[static_cast<int>(a)].ToString();
      }
      EXPECT_TRUE(runs[r].ledger.world == Traffic())
          << "the world comm carries " << runs[r].ledger.world.ToString();
    }
  }
}

// After a step: parameters and gradients 4 Psi_s each (full, this stage's tp shard), AdamW m and v of the
// own dp shard 8 ceil(Psi_s / D), no communication buffer, no activation left.
TEST(Train3dHidden, MemoryByKindMatchesTheFormulas) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const nn::GptConfig cfg;
  for (const Layout& layout : {Layout{{2, 2, 2}, 2}, Layout{{4, 2, 1}, 2}}) {
    const std::vector<RankRun>& runs = Runs(cfg, layout);
    ASSERT_EQ(runs.size(), 8u) << Label(layout);
    for (size_t r = 0; r < runs.size(); ++r) {
      const Expected x = Formulas(cfg, layout, runs[r].coord.pp);
      const MemoryUse& mem = runs[r].ledger.memory;
      const std::string where = Label(layout) + ", rank " + std::to_string(r);
      EXPECT_EQ(mem.current_of(MemCategory::kParameters), e * x.psi) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kGradients), e * x.psi) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), 2 * e * x.shard) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kCommBuffers), 0u) << where;
      EXPECT_EQ(mem.current_of(MemCategory::kActivations), 0u) << where;
      EXPECT_EQ(runs[r].after_create.current_of(MemCategory::kParameters), e * x.psi)
          << where << ": right after Create (a dense model left allocated?)";
    }
  }
}

// (1, 2, 1), m = 4: stage p holds k = min(P - p, m) micro-batches between their F and BW (1F1B), so its
// activation peak lies in [k A_p, (k + 1) A_p], A_p = L_s BlockCacheBytes(N) (+ the head's cache on the last
// stage: 4 N (2h + 1 + V)); all-forward-then-backward would hold 4.
TEST(Train3dHidden, ActivationPeakIsOneFOneB) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const nn::GptConfig cfg;
  const Layout layout{{1, 2, 1}, 4};
  const std::vector<RankRun>& runs = Runs(cfg, layout);
  ASSERT_EQ(runs.size(), 2u);
  const int64_t n = testing::kBatch / 4 * cfg.seq;
  for (int p = 0; p < 2; ++p) {
    const size_t a =
        2 * nn::BlockCacheBytes(cfg, n) + (p == 1 ? e * n * (2 * cfg.hidden + 1 + cfg.vocab) : 0);
    const size_t k = std::min(2 - p, 4);
    const size_t peak = runs[p].ledger.memory.peak_of(MemCategory::kActivations);
    std::printf("stage %d: activation peak %zu bytes = %.2f A (k = %zu)\n", p, peak, double(peak) / a, k);
    EXPECT_GE(peak, k * a) << "stage " << p;
    EXPECT_LE(peak, (k + 1) * a) << "stage " << p << " holds more micro-batches than 1F1B does";
  }
}

TEST(Train3dHidden, BadLayoutsAreClearErrors) {
  auto statuses = comm::RunRanks(
      3,
      [](int, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto grid = ProcessGrid::Create(world, {1, 3, 1});
        if (!grid.ok()) return grid.status();
        nn::GptConfig cfg;
        auto t = Trainer3D::Create(**grid, stream, cfg, {{1, 3, 1}, 1}, 8, testing::Adam());
        EXPECT_EQ(t.status().message(), "4 blocks do not split into 3 pipeline stages");
        cfg.layers = 3;
        t = Trainer3D::Create(**grid, stream, cfg, {{1, 3, 1}, 3}, 8, testing::Adam());
        EXPECT_EQ(t.status().message(),
                  "a global batch of 8 sequences does not split into 1 replicas x 3 micro-batches");
        cfg.tie_embeddings = true;
        t = Trainer3D::Create(**grid, stream, cfg, {{1, 3, 1}, 1, DpSharding::kZero3Reshard}, 8,
                              testing::Adam());
        EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::composition
