// Public tests of Lab 7 stage D: ZeRO-3 inside pipeline stages on (dp, pp, tp) = (2, 2, 1).
#include "labs/composition/fsdp_pipeline.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/ledger.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

nn::AdamWConfig Adam() {
  nn::AdamWConfig a;
  a.lr = 0.05f;
  a.eps = 0.1f;
  return a;
}

// (2, 2, 1), m = 2. Stage 0 has the units embed, blocks.0, blocks.1 (U = 3); one unit's dp collectives in a
// step (AG = all-gather of its flat parameters, RS = reduce-scatter of its flat gradients, each 4 D S_u
// bytes, S_u = ceil(Psi_u / D)):
//
//   reshard after every use   F0: AG | F1: AG | BW0: AG, RS | BW1: AG, RS     6 calls = 3 m
//   keep gathered             F0: AG | F1     | BW0         | BW1: RS         2 calls
//
// So per step, over the U units: reshard 3 m U = 18 calls, all-gathers 2 m 4 D sum_u S_u bytes,
// reduce-scatters m 4 D sum_u S_u; keep 2 U = 6 calls, 4 D sum_u S_u bytes each way. Both train exactly as
// the dense model.
//
// ExpectZero3 runs both modes on (2, 2, 1) with m micro-batches, the model `cfg` and data of `data_seed`;
// `note` ends every failure message (a seeded case's inputs and seed).
void ExpectZero3(int micro_batches, const nn::GptConfig& cfg, uint64_t data_seed, const std::string& note) {
  nn::Gpt dense(cfg);
  nn::AdamW opt(dense.Parameters(), Adam());
  dense.ZeroGrad();
  const nn::Batch batch = nn::SyntheticSequences(cfg.vocab, cfg.seq, data_seed, 0, 8);
  dense.Forward(batch);
  dense.Backward();
  opt.Step();
  std::map<std::string, std::vector<float>> want;
  for (nn::Parameter* p : dense.Parameters()) want[p->name()] = p->value.ToVector();
  for (DpSharding mode : {DpSharding::kZero3Reshard, DpSharding::kZero3KeepGathered}) {
    const Layout layout{{2, 2, 1}, micro_batches, mode};
    comm::CommOptions opts;
    opts.timeout = testing::Scaled(std::chrono::seconds(3));
    auto statuses = comm::RunRanks(
        4,
        [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
          auto grid = ProcessGrid::Create(world, layout.grid);
          if (!grid.ok()) return grid.status();
          auto trainer = Trainer3D::Create(**grid, stream, cfg, layout, 8, Adam());
          if (!trainer.ok()) return trainer.status();
          (*grid)->axis(Axis::kDp).ResetStats();
          auto r = (*trainer)->Step(batch);
          if (!r.ok()) return r.status();
          const Traffic dp = TrafficOf((*grid)->axis(Axis::kDp).stats());
          uint64_t shards = 0;  // sum over the stage's units of S_u
          for (const Unit& u : (*trainer)->units()) shards += (nn::CountParameters(u.params) + 1) / 2;
          const uint64_t units = (*trainer)->units().size(), m = micro_batches, bytes = 4 * 2 * shards;
          const bool reshard = mode == DpSharding::kZero3Reshard;
          EXPECT_EQ(dp.calls, reshard ? 3 * m * units : 2 * units) << Name(mode) << ", rank " << rank << note;
          EXPECT_EQ(dp.all_gather, reshard ? 2 * m * bytes : bytes)
              << Name(mode) << ", rank " << rank << note;
          EXPECT_EQ(dp.reduce_scatter, reshard ? m * bytes : bytes)
              << Name(mode) << ", rank " << rank << note;
          EXPECT_EQ(dp.all_reduce, 0u) << note;
          if (rank == 0) std::printf("%s, rank 0, dp: %s\n", Name(mode), dp.ToString().c_str());
          auto values = (*trainer)->LocalParameters();
          if (!values.ok()) return values.status();
          for (const auto& [name, v] : *values) {
            const std::vector<float>& w = want.at(name);
            float worst = v.size() == w.size() ? 0.f : 1e30f;
            for (size_t i = 0; i < v.size() && i < w.size(); ++i)
              worst = std::max(worst, std::fabs(v[i] - w[i]));
            EXPECT_LT(worst, 2e-5f) << name << " (" << Name(mode) << ")" << note;
          }
          return absl::OkStatus();
        },
        opts);
    SCOPED_TRACE(Name(mode));
    ASSERT_OK(comm::FirstError(statuses)) << note;
  }
}

TEST(FsdpPipelineTest, ReshardGathersPerMicroBatch) { ExpectZero3(2, nn::GptConfig{}, 1, ""); }

// Seeded: the same on (2, 2, 1) with m in {1, 2, 4} and the seeds of the model and of the data drawn from the
// grading seed, the kind of training the hidden tests draw. A hidden failure names its grading seed S;
// `bazel test //labs/composition:fsdp_pipeline_test --test_env=DISTLAB_GRADING_SEED=S` draws one of the same
// kind here.
TEST(FsdpPipelineTest, DrawnMicroBatchesAndSeeds) {
  testing::CaseRandom rng;
  const int m = rng.Pick(std::vector<int>{1, 2, 4});
  nn::GptConfig cfg;
  cfg.seed = rng.Int(1, 999999);
  const uint64_t data_seed = rng.Int(1, 999999);
  ExpectZero3(m, cfg, data_seed,
              "\n  (dp 2, pp 2, tp 1), m " + std::to_string(m) + ", model seed " + std::to_string(cfg.seed) +
                  ", data seed " + std::to_string(data_seed) + "\n  " + testing::SeedNote());
}

}  // namespace
}  // namespace distlab::composition
