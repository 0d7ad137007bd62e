// Lab 6 stage B, public tests: the load-balancing loss of a balanced and of a collapsed router, its gradient
// and the z-loss by hand, global-batch fractions on one and two ranks.
#include "labs/moe/balance.h"

#include <mutex>
#include <vector>

#include "gtest/gtest.h"
#include "reference/comm/comm.h"
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
  // logit: dz[t] = [.25 -.25] for both tokens (gradient descent subtracts it).
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz({2, 2});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(Uniform(2, 2, {0, 0}), 1.0, dz));
  EXPECT_NEAR(loss, 1.0, 1e-9);
  EXPECT_NEAR(dz.Get(0), 0.25, 1e-7);
  EXPECT_NEAR(dz.Get(1), -0.25, 1e-7);
}

// A top-1 routing with the given probabilities [T, E] and choices.
Routing TopOne(int64_t T, int E, std::vector<float> probs, std::vector<int32_t> expert) {
  Routing r = Uniform(T, E, std::move(expert));
  r.probs = std::move(probs);
  return r;
}

TEST(LoadBalancingLoss, GradientByHandAddsIntoDlogits) {
  // E = 2, T = 2, k = 1, coeff 1, both tokens on expert 0; dlogits holds 1 everywhere before the call.
  //
  //   token   p            expert      f = [1 0],  P = [.625 .375],  LBL = 2 * .625 = 1.25
  //   0       [.75 .25]    0
  //   1       [.5  .5 ]    0           dlogits after:  token 0  [1 + .1875, 1 - .1875]
  //                                                    token 1  [1 + .25,   1 - .25  ]
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz = Tensor::FromVector({2, 2}, {1, 1, 1, 1});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(TopOne(2, 2, {.75f, .25f, .5f, .5f}, {0, 0}), 1.0, dz));
  EXPECT_NEAR(loss, 1.25, 1e-7);
  EXPECT_EQ(lbl->fractions(), (std::vector<double>{1, 0}));
  EXPECT_NEAR(lbl->mean_probs()[0], .625, 1e-7);
  EXPECT_NEAR(lbl->mean_probs()[1], .375, 1e-7);
  const std::vector<float> want = {1.1875f, .8125f, 1.25f, .75f};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(dz.Get(i), want[i], 1e-6) << "dlogits[" << i / 2 << ", " << i % 2 << "]";
}

TEST(ZLoss, ByHand) {
  // T = 2, E = 3, coeff .5; dlogits starts at 0.
  //
  //   token  logits          logsumexp      softmax          dlogits
  //   0      [0 0 ln 2]      ln 4 = 1.3863  [.25 .25 .5]     [.17329 .17329 .34657]
  //   1      [0 0 0   ]      ln 3 = 1.0986  [1/3 1/3 1/3]    [.18310 .18310 .18310]
  //   z-loss = .5 (1.3863^2 + 1.0986^2) / 2 = .78219
  Tensor z = Tensor::FromVector({2, 3}, {0.f, 0.f, std::log(2.f), 0.f, 0.f, 0.f});
  Tensor dz({2, 3});
  ASSERT_OK_AND_ASSIGN(double loss, ZLoss(z, 0.5, dz));
  EXPECT_NEAR(loss, 0.78219025, 1e-6);
  const std::vector<float> want = {.17328680f, .17328680f, .34657359f, .18310205f, .18310205f, .18310205f};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(dz.Get(i), want[i], 1e-6) << "dlogits[" << i / 3 << ", " << i % 3 << "]";
}

// A routing with uniform probabilities and the given choices, k per token.
Routing UniformTopK(int64_t T, int E, int k, std::vector<int32_t> expert) {
  Routing r = Uniform(T, E, expert);
  r.top_k = k;
  r.gate.assign(T * k, 1.f / k);
  r.kept.assign(T * k, 1);
  return r;
}

TEST(LoadBalancingLoss, CountsRoutedAssignmentsBeforeDrops) {
  // Capacity dropped token 1's slot (kept = 0), but the router chose expert 1 for it: f counts every routed
  // slot, so f = [.5 .5], not [1 0].
  Routing r = Uniform(2, 2, {0, 1});
  r.kept = {1, 0};
  EXPECT_EQ(TokensPerExpert(r), (std::vector<double>{1, 1}));
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz({2, 2});
  ASSERT_OK(lbl->Compute(r, 1.0, dz).status());
  EXPECT_EQ(lbl->fractions(), (std::vector<double>{0.5, 0.5}));
}

TEST(LoadBalancingLoss, TopTwoFractionsDivideByKT) {
  // E = 2, T = 2, k = 2: each token chose both experts. counts [2 2], k T = 4 assignments, f = [.5 .5],
  // P = [.5 .5]: LBL = 2 (.25 + .25) = 1, the balanced value, in either scope.
  for (LblScope scope : {LblScope::kMicroBatch, LblScope::kGlobalBatch}) {
    ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(scope, 2, 2));
    Tensor dz({2, 2});
    ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(UniformTopK(2, 2, 2, {0, 1, 1, 0}), 1.0, dz));
    EXPECT_NEAR(loss, 1.0, 1e-9);
    EXPECT_EQ(lbl->fractions(), (std::vector<double>{0.5, 0.5}));
  }
}

TEST(GlobalBatchLoss, AccumulatesOverMicroBatchesOnOneRank) {
  // One rank (no dp group), E = 2, k = 1. Micro-batch a: 1 token on expert 0; b: 3 tokens on expert 1.
  //   global scope: f after a = [1 0], after b = counts [1 3] over 4 tokens = [.25 .75] (summed counts over
  //   summed T, not an average of the micro-batches); micro scope after b: [0 1]
  //   after OnOptimizerStep the buffer restarts: c (one token on expert 1) gives [0 1].
  ASSERT_OK_AND_ASSIGN(auto global, LoadBalancingLoss::Create(LblScope::kGlobalBatch, 2, 1));
  ASSERT_OK_AND_ASSIGN(auto micro, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz1({1, 2}), dz3({3, 2});
  ASSERT_OK(global->Compute(Uniform(1, 2, {0}), 1.0, dz1).status());
  EXPECT_EQ(global->fractions(), (std::vector<double>{1, 0}));
  ASSERT_OK(global->Compute(Uniform(3, 2, {1, 1, 1}), 1.0, dz3).status());
  ASSERT_OK(micro->Compute(Uniform(3, 2, {1, 1, 1}), 1.0, dz3).status());
  EXPECT_EQ(global->fractions(), (std::vector<double>{0.25, 0.75})) << "a and b together";
  EXPECT_EQ(micro->fractions(), (std::vector<double>{0, 1})) << "b alone";
  global->OnOptimizerStep();
  ASSERT_OK(global->Compute(Uniform(1, 2, {1}), 1.0, dz1).status());
  EXPECT_EQ(global->fractions(), (std::vector<double>{0, 1}));
}

TEST(GlobalBatchLoss, OneAllReduceOfTheCountsAndT) {
  // Two ranks with different T, E = 4, k = 1:
  //   rank 0: 2 tokens on experts 0, 0        rank 1: 3 tokens on experts 1, 2, 2
  //   summed counts [2 1 2 0] over T = 5 tokens: f = [.4 .2 .4 0] on both ranks.
  // Each Compute is one AllReduce of E + 1 = 5 numbers (the counts and T; 4- or 8-byte numbers).
  const std::vector<std::vector<int32_t>> choice = {{0, 0}, {1, 2, 2}};
  std::vector<std::vector<double>> f(2);
  std::vector<comm::Stats> stats(2);
  std::mutex mu;
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        auto lbl = LoadBalancingLoss::Create(LblScope::kGlobalBatch, 4, 1, &c, &s);
        if (!lbl.ok()) return lbl.status();
        const int64_t T = static_cast<int64_t>(choice[rank].size());
        Tensor dz({T, 4});
        c.ResetStats();
        auto loss = (*lbl)->Compute(Uniform(T, 4, choice[rank]), 1.0, dz);
        if (!loss.ok()) return loss.status();
        std::lock_guard<std::mutex> lock(mu);
        stats[rank] = c.stats();
        f[rank] = (*lbl)->fractions();
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(f[r].size(), 4u);
    const std::vector<double> want = {0.4, 0.2, 0.4, 0};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[r][i], want[i], 1e-12) << "rank " << r << " f_" << i;
    EXPECT_EQ(stats[r].collective_calls, 1u) << "rank " << r;
    EXPECT_TRUE(stats[r].collective_bytes == 5 * 8 || stats[r].collective_bytes == 5 * 4)
        << "rank " << r << ": " << stats[r].collective_bytes << " bytes all-reduced, not E + 1 = 5 numbers";
    EXPECT_EQ(stats[r].sends, 0u);
  }
}

TEST(GlobalBatchLoss, TwoRanksByHand) {
  // Two ranks, E = 2, k = 1, coeff 1, two tokens each, global scope:
  //
  //   rank  token  p           expert
  //   0     0      [.75 .25]   0         counts over both ranks [3 1] of 4 tokens: f = [.75 .25] on each rank
  //   0     1      [.5  .5 ]   0
  //   1     0      [.25 .75]   1         rank   P              LBL
  //   1     1      [.6  .4 ]   0         0      [.625 .375]    1.125
  //                                      1      [.425 .575]    .925
  // The mean of the two ranks' LBL, 1.025, is the LBL of the four tokens computed on one rank.
  const std::vector<Routing> routing = {TopOne(2, 2, {.75f, .25f, .5f, .5f}, {0, 0}),
                                        TopOne(2, 2, {.25f, .75f, .6f, .4f}, {1, 0})};
  std::vector<double> loss(2);
  std::vector<std::vector<double>> f(2), P(2);
  std::mutex mu;
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        auto lbl = LoadBalancingLoss::Create(LblScope::kGlobalBatch, 2, 1, &c, &s);
        if (!lbl.ok()) return lbl.status();
        Tensor dz({2, 2});
        auto l = (*lbl)->Compute(routing[rank], 1.0, dz);
        if (!l.ok()) return l.status();
        std::lock_guard<std::mutex> lock(mu);
        loss[rank] = *l, f[rank] = (*lbl)->fractions(), P[rank] = (*lbl)->mean_probs();
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  const std::vector<std::vector<double>> want_P = {{.625, .375}, {.425, .575}};
  const std::vector<double> want_loss = {1.125, .925};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(f[r].size(), 2u);
    ASSERT_EQ(P[r].size(), 2u);
    EXPECT_NEAR(f[r][0], .75, 1e-12) << "rank " << r;
    EXPECT_NEAR(f[r][1], .25, 1e-12) << "rank " << r;
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(P[r][i], want_P[r][i], 1e-7) << "rank " << r << " P_" << i;
    EXPECT_NEAR(loss[r], want_loss[r], 1e-6) << "rank " << r;
  }
  ASSERT_OK_AND_ASSIGN(auto single, LoadBalancingLoss::Create(LblScope::kMicroBatch, 2, 1));
  Tensor dz({4, 2});
  ASSERT_OK_AND_ASSIGN(
      double all,
      single->Compute(TopOne(4, 2, {.75f, .25f, .5f, .5f, .25f, .75f, .6f, .4f}, {0, 0, 1, 0}), 1.0, dz));
  EXPECT_NEAR(all, 1.025, 1e-6);
  EXPECT_NEAR((loss[0] + loss[1]) / 2, all, 1e-6);
}

}  // namespace
}  // namespace distlab::moe
