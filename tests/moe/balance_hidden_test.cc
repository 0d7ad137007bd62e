// Lab 6 stage B, hidden: the load-balancing loss pinned on hand-computed cases, its gradient (through P
// only), global-batch LBL across ranks and micro-batches, and the z-loss.
#include <cmath>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/balance.h"
#include "reference/comm/comm.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testutil::MakeRouting;
using testutil::RandomRouting;

// E = 4, k = 2, T = 2:
//   token 0: p = [.4 .3 .2 .1], experts {0, 1};  token 1: p = [.4 .1 .3 .2], experts {0, 2}
//   counts [2 1 1 0] -> f = counts / (k T) = [.5 .25 .25 0];  P = [.4 .2 .25 .15]
//   LBL = E sum f P = 4 (.2 + .05 + .0625) = 1.25
Routing HandRouting() { return MakeRouting(2, 4, 2, {.4f, .3f, .2f, .1f, .4f, .1f, .3f, .2f}, {0, 1, 0, 2}); }

TEST(LoadBalancingLossHidden, HandComputedValueTopTwo) {
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 4, 2));
  Tensor dz({2, 4});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(HandRouting(), 0.5, dz));
  EXPECT_NEAR(loss, 0.5 * 1.25, 1e-6);
  const std::vector<double> f = {.5, .25, .25, 0}, P = {.4, .2, .25, .15};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(lbl->fractions()[i], f[i], 1e-9) << "f_" << i << " = count / (k T)";
    EXPECT_NEAR(lbl->mean_probs()[i], P[i], 1e-7) << "P_" << i;
  }
}

TEST(LoadBalancingLossHidden, TokensPerExpertCountsEverySlot) {
  Routing r = HandRouting();
  r.kept[1] = 0;  // dropped by capacity: still routed there
  EXPECT_EQ(TokensPerExpert(r), (std::vector<double>{2, 1, 1, 0}));
}

TEST(LoadBalancingLossHidden, GradientByHandAndAccumulates) {
  // dz[t, j] = coeff E / T p_tj (f_j - sum_i f_i p_ti); token 0: sum f p = .325, so
  // dz[0, 0] = 1 * 4 / 2 * .4 * (.5 - .325) = .14 and dz[0, 3] = 2 * .1 * (0 - .325) = -.065.
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 4, 2));
  Tensor dz = Tensor::FromVector({2, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  ASSERT_OK(lbl->Compute(HandRouting(), 1.0, dz).status());
  EXPECT_NEAR(dz.Get(0), 1 + 0.14, 1e-6) << "dlogits must be added to, not overwritten";
  EXPECT_NEAR(dz.Get(3), 1 - 0.065, 1e-6);
  // token 1: sum f p = .2 + .025 + .075 = .3; dz[1, 2] = 2 * .3 * (.25 - .3) = -.03
  EXPECT_NEAR(dz.Get(6), -0.03, 1e-6);
}

// With f frozen, LBL(z) = coeff E sum_i f_i mean_t softmax(z_t)_i: the gradient must match central
// differences.
TEST(LoadBalancingLossHidden, GradientFlowsThroughProbabilitiesOnly) {
  const int64_t T = 6;
  const int E = 4, k = 2;
  Tensor z = testutil::RandomTensor({T, E}, 31);
  auto routing_of = [&](const Tensor& zz) {
    std::vector<float> p(T * E);
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int i = 0; i < E; ++i) s += p[t * E + i] = std::exp(zz.Get(t * E + i));
      for (int i = 0; i < E; ++i) p[t * E + i] /= s;
    }
    // A fixed choice (as the top-k of z would be: counts do not move under a tiny step).
    return MakeRouting(T, E, k, p, {0, 1, 0, 2, 1, 3, 0, 1, 2, 3, 0, 3});
  };
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  Tensor dz({T, E});
  ASSERT_OK(lbl->Compute(routing_of(z), 0.7, dz).status());
  const float eps = 1e-3f;
  for (int64_t i = 0; i < T * E; ++i) {
    Tensor zp = z, zm = z, scratch({T, E});
    zp.Set(i, z.Get(i) + eps);
    zm.Set(i, z.Get(i) - eps);
    const double lp = lbl->Compute(routing_of(zp), 0.7, scratch).value();
    const double lm = lbl->Compute(routing_of(zm), 0.7, scratch).value();
    EXPECT_NEAR(dz.Get(i), (lp - lm) / (2 * eps), 2e-4) << "dlogits[" << i / E << ", " << i % E << "]";
  }
}

TEST(LoadBalancingLossHidden, RejectsMismatchedArguments) {
  EXPECT_EQ(LoadBalancingLoss::Create(LblScope::kMicroBatch, 4, 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, 4, 1));
  Tensor dz({2, 4});
  EXPECT_EQ(lbl->Compute(HandRouting(), 1.0, dz).status().code(), absl::StatusCode::kInvalidArgument)
      << "routing has k = 2, the loss k = 1";
  ASSERT_OK_AND_ASSIGN(auto lbl2, LoadBalancingLoss::Create(LblScope::kMicroBatch, 4, 2));
  Tensor bad({3, 4});
  EXPECT_EQ(lbl2->Compute(HandRouting(), 1.0, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// n ranks, T tokens each: the rank-mean of global-batch LBL equals the LBL of the concatenated batch on one
// rank, f is the same on every rank and equal to the concatenated batch's, P stays local, and rank r's
// gradient is n times the concatenated batch's gradient on its rows (the DP average brings it back).
TEST(GlobalBatchLossHidden, EqualsSingleRankLossOfConcatenatedBatch) {
  const int n = 4, E = 4, k = 2;
  const int64_t T = 5;
  std::vector<Routing> local;
  for (int r = 0; r < n; ++r) local.push_back(RandomRouting(T, E, k, 100 + r));
  Routing all = local[0];
  all.tokens = n * T;
  for (int r = 1; r < n; ++r) {
    all.probs.insert(all.probs.end(), local[r].probs.begin(), local[r].probs.end());
    all.expert.insert(all.expert.end(), local[r].expert.begin(), local[r].expert.end());
    all.gate.insert(all.gate.end(), local[r].gate.begin(), local[r].gate.end());
    all.kept.insert(all.kept.end(), local[r].kept.begin(), local[r].kept.end());
  }
  ASSERT_OK_AND_ASSIGN(auto single, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  Tensor dz_all({n * T, E});
  ASSERT_OK_AND_ASSIGN(double want, single->Compute(all, 1.0, dz_all));
  const std::vector<double> f_all = single->fractions();

  std::vector<double> loss(n);
  std::vector<std::vector<double>> f(n), P(n);
  std::vector<Tensor> dz(n);
  std::mutex mu;
  testing::Activity activity("global-batch LBL on 4 ranks (one all-reduce each)");
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        auto lbl = LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k, &c, &s);
        if (!lbl.ok()) return lbl.status();
        Tensor d({T, E});
        auto l = (*lbl)->Compute(local[rank], 1.0, d);
        if (!l.ok()) return l.status();
        std::lock_guard<std::mutex> lock(mu);
        loss[rank] = *l, f[rank] = (*lbl)->fractions(), P[rank] = (*lbl)->mean_probs(), dz[rank] = d;
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  double mean = 0;
  for (int r = 0; r < n; ++r) mean += loss[r] / n;
  EXPECT_NEAR(mean, want, 1e-6) << "mean over ranks of global LBL vs LBL of the concatenated batch";
  for (int r = 0; r < n; ++r) {
    double local_loss = 0;
    for (int i = 0; i < E; ++i) {
      EXPECT_NEAR(f[r][i], f_all[i], 1e-12) << "rank " << r << " f_" << i << " must be the global fraction";
      double p = 0;
      for (int64_t t = 0; t < T; ++t) p += local[r].probs[t * E + i];
      EXPECT_NEAR(P[r][i], p / T, 1e-7) << "rank " << r << " P_" << i << " must stay local";
      local_loss += E * f_all[i] * p / T;
    }
    EXPECT_NEAR(loss[r], local_loss, 1e-6) << "rank " << r << ": E sum f_global P_local";
    for (int64_t i = 0; i < T * E; ++i) {
      EXPECT_NEAR(dz[r].Get(i) / n, dz_all.Get(r * T * E + i), 1e-6) << "rank " << r << " dlogits " << i;
    }
  }
}

// One rank, global scope: f accumulates over the micro-batches of a step (the gradient-accumulation batch of
// the step so far), also with dp null.
TEST(GlobalBatchLossHidden, OneRankAccumulatesOverTheMicroBatchesOfAStep) {
  const int E = 4, k = 1;
  // micro-batch a: 2 tokens on expert 0; b: 2 tokens on expert 1 and 1 on expert 2.
  const float q = 0.25f;
  Routing a = MakeRouting(2, E, k, std::vector<float>(8, q), {0, 0});
  Routing b = MakeRouting(3, E, k, std::vector<float>(12, q), {1, 1, 2});
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k));
  Tensor da({2, E}), db({3, E});
  ASSERT_OK(lbl->Compute(a, 1.0, da).status());
  EXPECT_EQ(lbl->fractions(), (std::vector<double>{1, 0, 0, 0})) << "the first micro-batch alone";
  ASSERT_OK_AND_ASSIGN(double lb, lbl->Compute(b, 1.0, db));
  EXPECT_EQ(lbl->fractions(), (std::vector<double>{0.4, 0.4, 0.2, 0}))
      << "global scope on one rank (dp null) must count micro-batches a and b of the step: 5 tokens, not b's "
         "3 alone";
  EXPECT_NEAR(lb, 1.0, 1e-6) << "uniform P: LBL = E * sum f / E = 1";
}

// One rank, global scope: OnOptimizerStep empties the buffer, so the next step's f counts its own
// micro-batches only.
TEST(GlobalBatchLossHidden, BufferRestartsAfterOptimizerStep) {
  const int E = 4, k = 1;
  const float q = 0.25f;
  // step 1: one micro-batch, 2 tokens on expert 0 and 1 on expert 1; step 2: 1 token on expert 3.
  Routing a = MakeRouting(3, E, k, std::vector<float>(12, q), {0, 0, 1});
  Routing c = MakeRouting(1, E, k, std::vector<float>(4, q), {3});
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k));
  Tensor da({3, E}), dc({1, E});
  ASSERT_OK(lbl->Compute(a, 1.0, da).status());
  lbl->OnOptimizerStep();
  ASSERT_OK_AND_ASSIGN(double lc, lbl->Compute(c, 1.0, dc));
  EXPECT_EQ(lbl->fractions(), (std::vector<double>{0, 0, 0, 1}))
      << "after OnOptimizerStep the buffer must restart: step 2's f counts step 2's tokens only";
  EXPECT_NEAR(lc, 1.0, 1e-6) << "uniform P: LBL = 1";
}

// Two ranks, two micro-batches each: after the second micro-batch f covers all four micro-batches.
TEST(GlobalBatchLossHidden, TwoRanksTwoMicroBatches) {
  const int n = 2, E = 2, k = 1;
  std::vector<std::vector<int32_t>> choice = {{0, 0}, {0, 1}, {1, 1}, {1, 1}};  // (rank, m) -> experts
  std::vector<std::vector<double>> first(n), second(n), micro(n);
  std::mutex mu;
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      n,
      [&](int rank, comm::Comm& cm, comm::Stream& s) -> absl::Status {
        auto g = LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k, &cm, &s);
        auto mb = LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k, &cm, &s);
        if (!g.ok()) return g.status();
        if (!mb.ok()) return mb.status();
        std::vector<std::vector<double>> f;
        for (int m = 0; m < 2; ++m) {
          Routing r = MakeRouting(2, E, k, {.5f, .5f, .5f, .5f}, choice[rank * 2 + m]);
          Tensor d({2, E}), d2({2, E});
          auto l = (*g)->Compute(r, 1.0, d);
          if (!l.ok()) return l.status();
          f.push_back((*g)->fractions());
          auto l2 = (*mb)->Compute(r, 1.0, d2);
          if (!l2.ok()) return l2.status();
        }
        std::lock_guard<std::mutex> lock(mu);
        first[rank] = f[0], second[rank] = f[1], micro[rank] = (*mb)->fractions();
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  for (int r = 0; r < n; ++r) {
    // micro-batch 0 of both ranks: {0,0} and {1,1} -> f = [.5 .5]; then {0,1} and {1,1} join: [3/8 5/8].
    EXPECT_EQ(first[r], (std::vector<double>{0.5, 0.5})) << "rank " << r;
    EXPECT_EQ(second[r], (std::vector<double>{0.375, 0.625})) << "rank " << r;
  }
  EXPECT_EQ(micro[0], (std::vector<double>{0.5, 0.5})) << "micro scope: rank 0's last micro-batch alone";
  EXPECT_EQ(micro[1], (std::vector<double>{0.0, 1.0})) << "micro scope: rank 1's last micro-batch alone";
}

// Three ranks with T = 1, 2 and 4 tokens, E = 3, top-2: every rank runs one global-batch Compute; returns
// each rank's fractions and its comm statistics for that Compute.
struct UnequalT {
  int n = 3, E = 3, k = 2;
  std::vector<int64_t> tokens = {1, 2, 4};
  std::vector<Routing> local;
  std::vector<double> counts;  // over the concatenated batch
  int64_t total = 0;
  std::vector<std::vector<double>> f;
  std::vector<comm::Stats> stats;
};

void RunUnequalT(UnequalT& u) {
  for (int r = 0; r < u.n; ++r) u.local.push_back(RandomRouting(u.tokens[r], u.E, u.k, 300 + r));
  u.counts.assign(u.E, 0);
  for (const Routing& r : u.local) {
    for (int32_t e : r.expert) u.counts[e] += 1;
    u.total += r.tokens;
  }
  u.f.resize(u.n);
  u.stats.resize(u.n);
  std::mutex mu;
  testing::Activity activity("global-batch LBL on 3 ranks with unequal T");
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      u.n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        auto lbl = LoadBalancingLoss::Create(LblScope::kGlobalBatch, u.E, u.k, &c, &s);
        if (!lbl.ok()) return lbl.status();
        Tensor d({u.tokens[rank], u.E});
        c.ResetStats();
        auto l = (*lbl)->Compute(u.local[rank], 1.0, d);
        if (!l.ok()) return l.status();
        std::lock_guard<std::mutex> lock(mu);
        u.f[rank] = (*lbl)->fractions();
        u.stats[rank] = c.stats();
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
}

// f is the concatenated batch's on every rank, although T differs: counts / (k * total T), summing to 1.
TEST(GlobalBatchLossHidden, FractionsOfTheConcatenatedBatchWithUnequalT) {
  UnequalT u;
  ASSERT_NO_FATAL_FAILURE(RunUnequalT(u));
  for (int r = 0; r < u.n; ++r) {
    double sum = 0;
    for (int i = 0; i < u.E; ++i) {
      EXPECT_NEAR(u.f[r][i], u.counts[i] / (u.k * u.total), 1e-12)
          << "rank " << r << " f_" << i << ": the counts of all ranks over k times the tokens of all ranks";
      sum += u.f[r][i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12) << "rank " << r << ": the fractions must sum to 1";
  }
}

// One AllReduce of E + 1 numbers per Compute (the counts and T), nothing else: P stays local.
TEST(GlobalBatchLossHidden, OneAllReduceOfCountsAndTokensPerCompute) {
  UnequalT u;
  ASSERT_NO_FATAL_FAILURE(RunUnequalT(u));
  for (int r = 0; r < u.n; ++r) {
    EXPECT_EQ(u.stats[r].collective_calls, 1u) << "rank " << r << " ran " << u.stats[r].collective_calls
                                               << " collectives; one all-reduce per Compute";
    EXPECT_TRUE(u.stats[r].collective_bytes == (u.E + 1) * 8u ||
                u.stats[r].collective_bytes == (u.E + 1) * 4u)
        << "rank " << r << " all-reduced " << u.stats[r].collective_bytes << " bytes, not E + 1 numbers";
  }
}

TEST(ZLossHidden, HandComputedValueAndGradient) {
  // logsumexp([0, 0]) = ln 2, logsumexp([ln 3, 0]) = ln 4: z = coeff (ln2^2 + ln4^2) / 2.
  Tensor z = Tensor::FromVector({2, 2}, {0.f, 0.f, static_cast<float>(std::log(3.0)), 0.f});
  Tensor dz({2, 2});
  ASSERT_OK_AND_ASSIGN(double loss, ZLoss(z, 0.1, dz));
  const double l2 = std::log(2.0), l4 = std::log(4.0);
  EXPECT_NEAR(loss, 0.1 * (l2 * l2 + l4 * l4) / 2, 1e-6);
  // d/dz = coeff 2 lse softmax / T
  EXPECT_NEAR(dz.Get(0), 0.1 * 2 * l2 * 0.5 / 2, 1e-6);
  EXPECT_NEAR(dz.Get(2), 0.1 * 2 * l4 * 0.75 / 2, 1e-6);
  EXPECT_NEAR(dz.Get(3), 0.1 * 2 * l4 * 0.25 / 2, 1e-6);
}

}  // namespace
}  // namespace distlab::moe
