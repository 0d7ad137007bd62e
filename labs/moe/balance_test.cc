// Lab 6 stage B, public tests: the load-balancing loss of a balanced and of a collapsed router.
#include "labs/moe/balance.h"

#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

Routing Uniform(int64_t T, int E, std::vector<int32_t> expert) {
  Routing r;
  r.tokens = T, r.experts = E, r.top_k = 1;
  r.probs.assign(T * E, 1.f / E);
  r.expert = std::move(expert);
  r.gate.assign(T, 1.f / E);
  r.kept.assign(T, 1);
  return r;
}

TEST(LoadBalancingLoss, BalancedRouterScoresOne) {
  // E = 2, T = 2, one token per expert: f = [.5 .5], P = [.5 .5], LBL = 2 (.25 + .25) = 1.
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz({2, 2});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(Uniform(2, 2, {0, 1}), 1.0, dz));
  EXPECT_NEAR(loss, 1.0, 1e-9);
}

TEST(LoadBalancingLoss, CollapsedRouterIsPushedAway) {
  // Both tokens on expert 0 with p = [.5 .5]: f = [1 0], LBL = 2 * .5 = 1, and the gradient lowers expert 0's
  // logit: dz[t, 0] = 2/2 * .5 * (1 - .5) = .25 > 0 (gradient descent subtracts it).
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz({2, 2});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(Uniform(2, 2, {0, 0}), 1.0, dz));
  EXPECT_NEAR(loss, 1.0, 1e-9);
  EXPECT_NEAR(dz.Get(0), 0.25, 1e-7);
  EXPECT_NEAR(dz.Get(1), -0.25, 1e-7);
}

}  // namespace
}  // namespace distlab::moe
