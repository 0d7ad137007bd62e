// Public tests of Lab 7 stage E (the cost model and the planner; notes/07-composition.md section 6).
#include "labs/composition/planner.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

// The ledger of section 4 for (2, 2, 2), m = 2, B = 8, stage 0 of the test model: N = 16 rows, 2,048 bytes
// an activation, Psi_0 = 32 * 32 + 8 * 32 + 2 * 6,448 = 14,176, S_0 = 7,088.
TEST(PlannerTest, PredictsTheLedgerOfTwoByTwoByTwo) {
  const nn::GptConfig cfg;
  auto s = PredictStage(cfg, {{2, 2, 2}, 2}, 8, 0);
  ASSERT_OK(s.status());
  EXPECT_EQ(s->params, 14176);
  EXPECT_EQ(s->of(Axis::kTp).calls, 16u);
  EXPECT_EQ(s->of(Axis::kTp).all_reduce, 32768u);
  EXPECT_EQ(s->of(Axis::kPp).sends, 2u);
  EXPECT_EQ(s->of(Axis::kPp).bytes_sent, 4096u);
  EXPECT_EQ(s->of(Axis::kDp).calls, 2u);
  EXPECT_EQ(s->of(Axis::kDp).reduce_scatter, 56704u);
  EXPECT_EQ(s->of(Axis::kDp).all_gather, 56704u);
  EXPECT_EQ(s->of(Axis::kEmb).calls, 0u) << "untied: the embedding group is silent";
  EXPECT_EQ(s->param_bytes, 4u * 14176);
  EXPECT_EQ(s->optimizer_bytes, 8u * 7088);
  // Lab 5's 1F1B rows for P = 2, m = 2:   stage 0:  F0 F1 BW0 BW1        stage 1:  F0 BW0 F1 BW1
  // After F1, stage 0 holds micro-batches 0 and 1 between their F and BW: 2 units of 2 blocks' caches.
  EXPECT_EQ(s->activation_unit, 2 * nn::BlockCacheBytes(cfg, 16, 2));
  EXPECT_EQ(s->activation_bytes, 2 * s->activation_unit);
  auto last = PredictStage(cfg, {{2, 2, 2}, 2}, 8, 1);  // stage 1 never holds more than 1
  ASSERT_OK(last.status());
  EXPECT_EQ(last->activation_bytes, last->activation_unit);
}

// The order is pinned: dp, then pp, then m ascending; 26 layouts of 8 ranks for the test model and B = 8.
TEST(PlannerTest, EnumeratesInTheStatedOrder) {
  const std::vector<Layout> all = EnumerateLayouts(nn::GptConfig{}, 8, 8);
  ASSERT_EQ(all.size(), 26u);
  const int first[][4] = {{1, 1, 8, 1}, {1, 1, 8, 2}, {1, 1, 8, 4}, {1, 1, 8, 8}, {1, 2, 4, 1}};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(all[i].grid.dp, first[i][0]) << i;
    EXPECT_EQ(all[i].grid.pp, first[i][1]) << i;
    EXPECT_EQ(all[i].grid.tp, first[i][2]) << i;
    EXPECT_EQ(all[i].micro_batches, first[i][3]) << i;
  }
  EXPECT_EQ(all.back().grid.dp, 8);
}

// The best candidate fits and no fitting candidate is faster; too little memory is a clear error. Every
// candidate's pipeline is Lab 5's 1F1B with every F costing forward_s and every BW backward_s; for example
//
//   (P, m) = (1, 1):  F BW                                        1 (F + B)
//   (P, m) = (2, 4):  stage 0  F0 F1 BW0 F2 BW1 F3 BW2 BW3          5 (F + B): stage 1 starts one F late
//                     stage 1     F0 BW0 F1 BW1 F2 BW2 F3 BW3       and stage 0 ends one BW after it
//   (P, m) = (4, 8):                                               11 (F + B)
TEST(PlannerTest, PicksTheFastestThatFits) {
  const nn::GptConfig cfg;
  Cluster c;
  c.gpus_per_node = 4;
  c.memory_bytes = 1e9;
  c.flops = 1e9;
  c.intra = {1e-6, 1e11};
  c.inter = {1e-5, 1e10};
  auto plan = MakePlan(cfg, 8, 8, c);
  ASSERT_OK(plan.status());
  ASSERT_EQ(plan->candidates.size(), 26u);
  ASSERT_GE(plan->best, 0);
  const Candidate& best = plan->candidates[plan->best];
  EXPECT_TRUE(best.fits);
  const struct {
    int pp, m;
    double slots;  // pipeline_s / (forward_s + backward_s)
  } kSlots[] = {{1, 1, 1}, {2, 4, 5}, {4, 8, 11}};
  int checked = 0;
  for (const Candidate& x : plan->candidates) {
    if (x.fits) EXPECT_GE(x.step_s, best.step_s);
    EXPECT_DOUBLE_EQ(x.step_s, x.pipeline_s + x.dp_s + x.emb_s);
    for (const auto& k : kSlots) {
      if (x.layout.grid.pp != k.pp || x.layout.micro_batches != k.m) continue;
      EXPECT_DOUBLE_EQ(x.pipeline_s, k.slots * (x.forward_s + x.backward_s)) << "P " << k.pp << ", m " << k.m;
      ++checked;
    }
  }
  EXPECT_GT(checked, 2);
  c.memory_bytes = 1000;
  const auto none = MakePlan(cfg, 8, 8, c);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
}

// Seeded: the same checks on a cluster drawn from the grading seed (nodes of 2 or 4, flops in [1e8, 1e9],
// intra-node links of 5e-7 to 5e-6 s and 1e10 to 1e11 B/s, inter-node links of 5e-6 to 5e-5 s and 1e9 to
// 1e10 B/s), the kind of cluster the hidden tests draw. A hidden failure names its grading seed S; `bazel
// test //labs/composition:planner_test --test_env=DISTLAB_GRADING_SEED=S` draws a cluster of the same kind.
TEST(PlannerTest, PicksTheFastestThatFitsOnADrawnCluster) {
  testing::CaseRandom rng;
  auto log_uniform = [&rng](double lo, double hi) { return std::exp(rng.Real(std::log(lo), std::log(hi))); };
  const nn::GptConfig cfg;
  Cluster c;
  c.gpus_per_node = rng.Pick(std::vector<int>{2, 4});
  c.memory_bytes = 1e9;
  c.flops = log_uniform(1e8, 1e9);
  c.intra = {log_uniform(5e-7, 5e-6), log_uniform(1e10, 1e11)};
  c.inter = {log_uniform(5e-6, 5e-5), log_uniform(1e9, 1e10)};
  std::ostringstream drawn;
  drawn << "nodes of " << c.gpus_per_node << ", flops " << c.flops << ", intra " << c.intra.alpha_s << " s + "
        << c.intra.bytes_per_s << " B/s, inter " << c.inter.alpha_s << " s + " << c.inter.bytes_per_s
        << " B/s\n  " << testing::SeedNote();
  auto plan = MakePlan(cfg, 8, 8, c);
  ASSERT_OK(plan.status()) << drawn.str();
  ASSERT_EQ(plan->candidates.size(), 26u) << drawn.str();
  ASSERT_GE(plan->best, 0) << drawn.str();
  const Candidate& best = plan->candidates[plan->best];
  EXPECT_TRUE(best.fits) << drawn.str();
  const struct {
    int pp, m;
    double slots;  // pipeline_s / (forward_s + backward_s)
  } kSlots[] = {{1, 1, 1}, {2, 4, 5}, {4, 8, 11}};
  for (const Candidate& x : plan->candidates) {
    if (x.fits) {
      EXPECT_GE(x.step_s, best.step_s) << drawn.str();
    }
    EXPECT_DOUBLE_EQ(x.step_s, x.pipeline_s + x.dp_s + x.emb_s) << drawn.str();
    for (const auto& k : kSlots) {
      if (x.layout.grid.pp != k.pp || x.layout.micro_batches != k.m) continue;
      EXPECT_DOUBLE_EQ(x.pipeline_s, k.slots * (x.forward_s + x.backward_s))
          << "P " << k.pp << ", m " << k.m << ", " << drawn.str();
    }
  }
}

// 8 ranks in nodes of 4 (node 0 = ranks 0..3, node 1 = ranks 4..7), (dp, pp, tp) = (1, 2, 4), m = 1, so
// N = 64 rows and an activation is a = 4 N h = 8,192 bytes:
//
//   tp groups  [0 1 2 3] [4 5 6 7]   inside a node:    intra    2 L_s = 4 all-reduces of a over 4 ranks
//   pipelines  [0 4] [1 5] [2 6] ...  across the nodes: inter    one message of a per F on stage 0
//
// Stage 0 (the embeddings and 2 blocks: Psi_0 = V h + s h + 2 BlockParameters(4) = 7,920) is the slowest:
//   forward_s  = 2 N Psi_0 / flops + 4 AllReduceTime(a, 4, intra) + P2PTime(a, inter)
//   backward_s = 4 N Psi_0 / flops + 4 AllReduceTime(a, 4, intra)
TEST(PlannerTest, LinksFollowTheRankOrder) {
  const nn::GptConfig cfg;
  Cluster c;
  c.gpus_per_node = 4;
  c.memory_bytes = 1e9;
  c.flops = 1e9;
  c.intra = {1e-6, 1e11};
  c.inter = {1e-5, 1e10};
  auto plan = MakePlan(cfg, 8, 8, c);
  ASSERT_OK(plan.status());
  const Candidate* x = nullptr;
  for (const Candidate& k : plan->candidates) {
    const GridShape& g = k.layout.grid;
    if (g.dp == 1 && g.pp == 2 && g.tp == 4 && k.layout.micro_batches == 1) x = &k;
  }
  ASSERT_NE(x, nullptr) << "(1, 2, 4), m = 1 is a layout of 8 ranks";
  const double a = 8192, psi = 32 * 32 + 8 * 32 + 2 * nn::BlockParameters(cfg, 4),
               compute = 2 * 64 * psi / 1e9;
  ASSERT_EQ(psi, 7920);
  EXPECT_DOUBLE_EQ(x->forward_s, compute + 4 * AllReduceTime(a, 4, c.intra) + P2PTime(a, c.inter));
  EXPECT_DOUBLE_EQ(x->backward_s, 2 * compute + 4 * AllReduceTime(a, 4, c.intra));
}

}  // namespace
}  // namespace distlab::composition
