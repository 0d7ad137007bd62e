// Hidden tests of Lab 7 stage C: 3D training equals single-rank training, and its ledger equals the
// formulas (notes/07-composition.md section 4), axis by axis and kind by kind. Every case draws the seeds of
// the model and of the data from the grading seed, and the micro-batch count and, where its name leaves
// it open, the layout among those of the same world size (the test model and its batch stay: they set the
// cost).
#include <algorithm>
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
using testing::Again;
using testing::CaseRandom;
using testing::RankRun;
using testing::Training;

constexpr float kTolerance = 2e-5f;
constexpr uint64_t e = 4;  // bytes per f32

// One run per training (layout, seeds, tied or not) per process.
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

// A training on `grid` with m drawn from `ms`, the model's and the data's seeds drawn.
Training Draw(CaseRandom& rng, const GridShape& grid, const std::vector<int>& ms, bool tied = false) {
  Training t;
  t.cfg.tie_embeddings = tied;
  t.layout = {grid, rng.Pick(ms)};
  testing::DrawSeeds(rng, &t);
  return t;
}

void ExpectEqualsSingleRank(const Training& t) {
  const std::vector<RankRun>& runs = Runs(t);
  ASSERT_EQ(runs.size(), static_cast<size_t>(t.layout.grid.world()))
      << t.Label() << ": the run failed" << Again();
  testing::ExpectEquivalent(t, runs, kTolerance);
}

// m in {2, 4}.
TEST(Train3dHidden, EqualsSingleRankOnTwoByTwoByTwo) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, {2, 2, 2}, {2, 4}));
}

// m in {2, 4, 8}.
TEST(Train3dHidden, EqualsSingleRankOnOneByFourByTwo) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, {1, 4, 2}, {2, 4, 8}));
}

// m = 2 (B / D = 2); the seeds drawn.
TEST(Train3dHidden, EqualsSingleRankOnFourByTwoByOne) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, {4, 2, 1}, {2}));
}

// m in {2, 4, 8}: micro-batches accumulate on one stage.
TEST(Train3dHidden, EqualsSingleRankTensorOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, {1, 1, 8}, {2, 4, 8}));
}

// m = 1 (B / D = 1); the seeds drawn.
TEST(Train3dHidden, EqualsSingleRankDataOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, {8, 1, 1}, {1}));
}

// m in {4, 8} (every stage has a steady phase) and m = 2 (stages 0 and 1 go from warm-up straight to
// cool-down).
TEST(Train3dHidden, EqualsSingleRankPipelineOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectEqualsSingleRank(Draw(rng, {1, 4, 1}, {4, 8}));
  ExpectEqualsSingleRank(Draw(rng, {1, 4, 1}, {2}));
}

// Tied embeddings over two stages, (1, 2, 2) or (2, 2, 1), m >= 2: the copies stay equal to the dense wte
// (its gradient has both uses), and the emb comm carries one all-reduce of V h floats per step, on the
// first and the last stage only.
TEST(Train3dHidden, TiedEmbeddingsAcrossStages) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  const GridShape grid = rng.Pick(std::vector<GridShape>{{1, 2, 2}, {2, 2, 1}});
  const Training t = Draw(rng, grid, grid.dp == 1 ? std::vector<int>{2, 4, 8} : std::vector<int>{2, 4}, true);
  ExpectEqualsSingleRank(t);
  const std::vector<RankRun>& runs = Runs(t);
  for (size_t r = 0; r < runs.size(); ++r) {
    const Traffic& emb = runs[r].ledger.of(Axis::kEmb);
    const std::string on = t.Label() + ", rank " + std::to_string(r) + ": ";
    EXPECT_EQ(emb.calls, 1u) << on << "collective calls on the emb comm in a step" << Again();
    EXPECT_EQ(emb.all_reduce, e * t.cfg.vocab * t.cfg.hidden)
        << on << "all-reduce bytes on the emb comm in a step (V h floats)" << Again();
    EXPECT_EQ(emb.payload(), emb.all_reduce) << on << "the emb comm carries only the all-reduce" << Again();
    EXPECT_EQ(runs[r].values.count("wte.weight"), 1u) << on << "both stages hold wte" << Again();
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

// Two layouts of 8 ranks with several stages and a stage of several ranks (dp or tp > 1: a pp neighbour is
// not the next global rank), m drawn among those B = 8 allows.
std::vector<GridShape> PipelinesOfEight() {
  std::vector<GridShape> out;
  for (const GridShape& g : testing::ShapesOf(8)) {
    if (g.pp > 1 && g.dp * g.tp > 1) out.push_back(g);
  }
  return out;
}

TEST(Train3dHidden, TrafficPerAxisMatchesTheFormulas) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  std::vector<GridShape> grids = PipelinesOfEight();
  rng.Shuffle(grids);
  for (int i = 0; i < 2; ++i) {
    const Training t = Draw(rng, grids[i], testing::MicroBatchesOf(grids[i]));
    const std::vector<RankRun>& runs = Runs(t);
    ASSERT_EQ(runs.size(), 8u) << t.Label() << ": the run failed" << Again();
    for (size_t r = 0; r < runs.size(); ++r) {
      const Expected x = Formulas(t.cfg, t.layout, runs[r].coord.pp);
      for (Axis a : kAllAxes) {
        const Traffic& got = runs[r].ledger.of(a);
        EXPECT_TRUE(got == x.traffic[static_cast<int>(a)])
            << t.Label() << ", rank " << r << " (stage " << runs[r].coord.pp << "), axis " << Name(a)
            << ": the step's ledger is " << got.ToString() << "; against the formulas of notes section 4, "
            << testing::Differences(got, x.traffic[static_cast<int>(a)]) << " differ" << Again();
      }
      EXPECT_TRUE(runs[r].ledger.world == Traffic())
          << t.Label() << ", rank " << r << ": the world comm carries " << runs[r].ledger.world.ToString()
          << Again();
    }
  }
}

// After a step: parameters and gradients 4 Psi_s each (full, this stage's tp shard), AdamW m and v of the
// own dp shard 8 ceil(Psi_s / D), no communication buffer, no activation left. Two layouts of 8 ranks with
// several stages, the first with dp > 1.
TEST(Train3dHidden, MemoryByKindMatchesTheFormulas) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  std::vector<GridShape> grids = PipelinesOfEight();
  rng.Shuffle(grids);
  std::stable_partition(grids.begin(), grids.end(), [](const GridShape& g) { return g.dp > 1; });
  for (int i = 0; i < 2; ++i) {
    const Training t = Draw(rng, grids[i], testing::MicroBatchesOf(grids[i]));
    const std::vector<RankRun>& runs = Runs(t);
    ASSERT_EQ(runs.size(), 8u) << t.Label() << ": the run failed" << Again();
    for (size_t r = 0; r < runs.size(); ++r) {
      const Expected x = Formulas(t.cfg, t.layout, runs[r].coord.pp);
      const MemoryUse& mem = runs[r].ledger.memory;
      const std::string where =
          t.Label() + ", rank " + std::to_string(r) + " (stage " + std::to_string(runs[r].coord.pp) + ")";
      EXPECT_EQ(mem.current_of(MemCategory::kParameters), e * x.psi)
          << where << ": parameter bytes after a step (4 Psi_s)" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kGradients), e * x.psi)
          << where << ": gradient bytes after a step (4 Psi_s)" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), 2 * e * x.shard)
          << where << ": optimizer bytes after a step (8 ceil(Psi_s / D))" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kCommBuffers), 0u)
          << where << ": communication buffers left after a step" << Again();
      EXPECT_EQ(mem.current_of(MemCategory::kActivations), 0u)
          << where << ": activations left after a step" << Again();
      EXPECT_EQ(runs[r].after_create.current_of(MemCategory::kParameters), e * x.psi)
          << where << ": parameter bytes right after Create (a dense model left allocated?)" << Again();
    }
  }
}

// (1, 2, 1), m in {4, 8}: stage p holds k = min(P - p, m) micro-batches between their F and BW (1F1B), so
// its activation peak lies in [k A_p, (k + 1) A_p], A_p = L_s BlockCacheBytes(N) (+ the head's cache on the
// last stage: 4 N (2h + 1 + V)); all-forward-then-backward would hold m.
TEST(Train3dHidden, ActivationPeakIsOneFOneB) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  const Training t = Draw(rng, {1, 2, 1}, {4, 8});
  const nn::GptConfig& cfg = t.cfg;
  const int m = t.layout.micro_batches;
  const std::vector<RankRun>& runs = Runs(t);
  ASSERT_EQ(runs.size(), 2u) << t.Label() << ": the run failed" << Again();
  const int64_t n = testing::kBatch / m * cfg.seq;
  for (int p = 0; p < 2; ++p) {
    const size_t a =
        2 * nn::BlockCacheBytes(cfg, n) + (p == 1 ? e * n * (2 * cfg.hidden + 1 + cfg.vocab) : 0);
    const size_t k = std::min(2 - p, m);
    const size_t peak = runs[p].ledger.memory.peak_of(MemCategory::kActivations);
    std::printf("stage %d: activation peak %zu bytes = %.2f A (k = %zu)\n", p, peak, double(peak) / a, k);
    EXPECT_GE(peak, k * a) << t.Label() << ", stage " << p << ": the activation peak is " << double(peak) / a
                           << " A_p; 1F1B holds " << k << " micro-batches at its peak" << Again();
    EXPECT_LE(peak, (k + 1) * a) << t.Label() << ", stage " << p << ": the activation peak is "
                                 << double(peak) / a << " A_p, more micro-batches than 1F1B holds (" << k
                                 << ")" << Again();
  }
}

// Trainer3D::Create's rules on drawn numbers: blocks that P = 3 or 5 stages do not divide, a global batch
// that m micro-batches do not divide, tied embeddings with a ZeRO-3 sharding.
TEST(Train3dHidden, BadLayoutsAreClearErrors) {
  CaseRandom rng;
  const int P = rng.Pick(std::vector<int>{3, 5});
  int layers = static_cast<int>(rng.Int(P + 1, 3 * P - 1));
  if (layers == 2 * P) ++layers;
  const int64_t batch = rng.Int(4, 12);
  int m = static_cast<int>(rng.Int(2, 5));
  while (batch % m == 0) ++m;
  const DpSharding zero3 =
      rng.Pick(std::vector<DpSharding>{DpSharding::kZero3Reshard, DpSharding::kZero3KeepGathered});
  const GridShape grid{1, P, 1};
  const std::string blocks =
      std::to_string(layers) + " blocks do not split into " + std::to_string(P) + " pipeline stages";
  const std::string sequences = "a global batch of " + std::to_string(batch) +
                                " sequences does not split into 1 replicas x " + std::to_string(m) +
                                " micro-batches";
  auto statuses = comm::RunRanks(
      P,
      [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto g = ProcessGrid::Create(world, grid);
        if (!g.ok()) return g.status();
        const std::string on =
            "rank " + std::to_string(rank) + " of " + testing::Str(grid) + ": Create with ";
        nn::GptConfig cfg;
        cfg.layers = layers;
        auto t = Trainer3D::Create(**g, stream, cfg, {grid, 1}, 8, testing::Adam());
        EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
            << on << layers << " blocks" << Again();
        EXPECT_EQ(t.status().message(), blocks) << on << layers << " blocks" << Again();
        cfg.layers = P;
        t = Trainer3D::Create(**g, stream, cfg, {grid, m}, batch, testing::Adam());
        EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
            << on << "a batch of " << batch << ", m " << m << Again();
        EXPECT_EQ(t.status().message(), sequences) << on << "a batch of " << batch << ", m " << m << Again();
        cfg.tie_embeddings = true;
        t = Trainer3D::Create(**g, stream, cfg, {grid, 1, zero3}, 8, testing::Adam());
        EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
            << on << "tied embeddings and " << Name(zero3) << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << testing::Str(grid) << Again();
}

}  // namespace
}  // namespace distlab::composition
