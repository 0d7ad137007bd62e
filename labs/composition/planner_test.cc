// Public tests of Lab 7 stage E (the cost model and the planner; notes/07-composition.md section 6).
#include "labs/composition/planner.h"

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
  // 1F1B: stage 0 of 2 holds min(P - p, m) = 2 micro-batches of 2 blocks' caches.
  EXPECT_EQ(s->activation_unit, 2 * nn::BlockCacheBytes(cfg, 16, 2));
  EXPECT_EQ(s->activation_bytes, 2 * s->activation_unit);
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

// The best candidate fits and no fitting candidate is faster; too little memory is a clear error.
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
  for (const Candidate& x : plan->candidates) {
    if (x.fits) EXPECT_GE(x.step_s, best.step_s);
    EXPECT_DOUBLE_EQ(x.step_s, x.pipeline_s + x.dp_s + x.emb_s);
    EXPECT_DOUBLE_EQ(x.pipeline_s,
                     (x.layout.micro_batches + x.layout.grid.pp - 1) * (x.forward_s + x.backward_s));
  }
  c.memory_bytes = 1000;
  const auto none = MakePlan(cfg, 8, 8, c);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace distlab::composition
