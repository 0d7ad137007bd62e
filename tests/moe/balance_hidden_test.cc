// Lab 6 stage B, hidden: the load-balancing loss against its formula, its gradient (through P only) against
// the closed form and finite differences, global-batch LBL across ranks and micro-batches, and the z-loss.
//
// Every case draws its sizes (T, E, k, ranks, micro-batches), routings, coefficients and logits from the
// grading seed (distlab::testing::CaseRandom); a failure names the input and ends with how to draw it again.
// The formulas are balance.h's: f_i = count_i / (k T), P_i = mean_t probs[t, i], LBL = coeff E sum_i f_i P_i.
#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/balance.h"
#include "reference/comm/comm.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testing::CaseRandom;
using testing::SeedNote;
using testutil::FirstMismatch;
using testutil::List;
using testutil::MakeRouting;
using testutil::RandomRouting;
using testutil::Str;

// A routing of T tokens drawn from the case's stream: softmax of random logits, top-k by probability.
Routing Draw(CaseRandom& rnd, int64_t T, int E, int k) { return RandomRouting(T, E, k, rnd.Next()); }

// "E = 5, k = 2, T = 4, coeff 0.73"
std::string Shape(int E, int k, int64_t T, double coeff) {
  return Str("E = ", E, ", k = ", k, ", T = ", T, ", coeff ", coeff);
}

// The routing's counts per expert (every slot, kept or not), in double.
std::vector<double> Counts(const Routing& r) {
  std::vector<double> c(r.experts, 0.0);
  for (int32_t e : r.expert) c[e] += 1;
  return c;
}

// P_i = mean_t probs[t, i], in double.
std::vector<double> MeanProbs(const Routing& r) {
  std::vector<double> P(r.experts, 0.0);
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int i = 0; i < r.experts; ++i) P[i] += r.probs[t * r.experts + i] / static_cast<double>(r.tokens);
  }
  return P;
}

// f from summed counts and summed T.
std::vector<double> Fractions(const std::vector<double>& counts, int k, double tokens) {
  std::vector<double> f(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) f[i] = counts[i] / (k * tokens);
  return f;
}

double Lbl(double coeff, const std::vector<double>& f, const std::vector<double>& P) {
  double s = 0;
  for (size_t i = 0; i < f.size(); ++i) s += f[i] * P[i];
  return coeff * static_cast<double>(f.size()) * s;
}

// The gradient of the LBL with respect to the logits, f held fixed:
// dz[t, j] = coeff E / T p_tj (f_j - sum_i f_i p_ti).
std::vector<double> LblGradient(const Routing& r, double coeff, const std::vector<double>& f) {
  const int E = r.experts;
  const int64_t T = r.tokens;
  std::vector<double> dz(T * E);
  for (int64_t t = 0; t < T; ++t) {
    double fp = 0;
    for (int i = 0; i < E; ++i) fp += f[i] * r.probs[t * E + i];
    for (int j = 0; j < E; ++j) dz[t * E + j] = coeff * E / T * r.probs[t * E + j] * (f[j] - fp);
  }
  return dz;
}

// Reports the first expert whose fraction differs from `want` (no failure when none does).
void ExpectFractions(const std::vector<double>& got, const std::vector<double>& want, const std::string& what,
                     const std::string& input) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << ": fractions() holds " << got.size() << " values, not E = " << want.size()
                  << "; " << input << "; " << SeedNote();
    return;
  }
  if (auto m = FirstMismatch(
          got.size(), [&](int64_t i) { return got[i]; }, [&](int64_t i) { return want[i]; }, 1e-12)) {
    ADD_FAILURE() << what << ": f_" << m.index << " = " << m.got << ", not " << m.want << "; " << input
                  << "; " << SeedNote();
  }
}

TEST(LoadBalancingLossHidden, HandComputedValueTopTwo) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(3, 8)), k = static_cast<int>(rnd.Int(2, std::min(E - 1, 4)));
  const int64_t T = rnd.Int(2, 8);
  const double coeff = rnd.Real(0.1, 2.0);
  const Routing r = Draw(rnd, T, E, k);
  const std::vector<double> counts = Counts(r), P = MeanProbs(r), f = Fractions(counts, k, T);
  const std::string input =
      Str("micro-batch LBL, ", Shape(E, k, T, coeff), ", counts per expert ", List(counts));
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  Tensor dz({T, E});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(r, coeff, dz));
  ASSERT_EQ(lbl->fractions().size(), static_cast<size_t>(E)) << input << "; " << SeedNote();
  ASSERT_EQ(lbl->mean_probs().size(), static_cast<size_t>(E)) << input << "; " << SeedNote();
  if (auto m = FirstMismatch(
          E, [&](int64_t i) { return lbl->fractions()[i]; }, [&](int64_t i) { return f[i]; }, 1e-9)) {
    ADD_FAILURE() << input << ": f_" << m.index << " = " << m.got
                  << "; f_i is expert i's share of the k T = " << k * T << " assignments; " << SeedNote();
  }
  if (auto m = FirstMismatch(
          E, [&](int64_t i) { return lbl->mean_probs()[i]; }, [&](int64_t i) { return P[i]; }, 1e-7)) {
    ADD_FAILURE() << input << ": P_" << m.index << " = " << m.got
                  << " is not the mean of the tokens' probabilities of expert " << m.index << "; "
                  << SeedNote();
  }
  const double want = Lbl(coeff, f, P);
  EXPECT_TRUE(std::fabs(loss - want) <= 1e-6 * std::max(1.0, std::fabs(want)))
      << input << ": the loss is " << loss << ", not coeff E sum_i f_i P_i; " << SeedNote();
}

TEST(LoadBalancingLossHidden, TokensPerExpertCountsEverySlot) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(2, 8)), k = static_cast<int>(rnd.Int(1, std::min(E, 3)));
  const int64_t T = rnd.Int(2, 10);
  Routing r = Draw(rnd, T, E, k);
  std::vector<int> dropped;
  for (int64_t s = 0; s < T * k; ++s) {
    if (rnd.Chance(0.4)) r.kept[s] = 0, dropped.push_back(static_cast<int>(s));
  }
  if (dropped.empty()) {
    const int64_t s = rnd.Int(0, T * k - 1);
    r.kept[s] = 0, dropped.push_back(static_cast<int>(s));
  }
  const std::vector<double> got = TokensPerExpert(r), want = Counts(r);
  const std::string input = Str("TokensPerExpert: T = ", T, ", E = ", E, ", k = ", k, ", experts ",
                                List(r.expert), ", slots dropped by capacity ", List(dropped));
  ASSERT_EQ(got.size(), static_cast<size_t>(E)) << input << "; " << SeedNote();
  if (auto m = FirstMismatch(
          E, [&](int64_t i) { return got[i]; }, [&](int64_t i) { return want[i]; }, 0)) {
    ADD_FAILURE() << input << ": expert " << m.index << " counts " << m.got
                  << "; every slot the router chose counts, kept or dropped; " << SeedNote();
  }
}

TEST(LoadBalancingLossHidden, GradientByHandAndAccumulates) {
  // dz[t, j] = coeff E / T p_tj (f_j - sum_i f_i p_ti), added to what dlogits held. The counts are redrawn
  // until they are not all equal: with every f_i = 1/E the gradient vanishes.
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(3, 8)), k = static_cast<int>(rnd.Int(2, std::min(E - 1, 4)));
  const int64_t T = rnd.Int(2, 8);
  const double coeff = rnd.Real(0.1, 2.0);
  Routing r;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
    r = Draw(rnd, T, E, k);
    const std::vector<double> c = Counts(r);
    if (*std::max_element(c.begin(), c.end()) > *std::min_element(c.begin(), c.end())) break;
  }
  const Tensor before = testutil::RandomTensor({T, E}, rnd.Next());
  const std::string input = Str("micro-batch LBL, ", Shape(E, k, T, coeff), ", counts per expert ",
                                List(Counts(r)), ", dlogits holding N(0, 1) values before the call");
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  Tensor dz = before;
  ASSERT_OK(lbl->Compute(r, coeff, dz).status());
  const std::vector<double> grad = LblGradient(r, coeff, Fractions(Counts(r), k, T));
  if (auto m = FirstMismatch(
          T * E, [&](int64_t i) { return dz.Get(i) - before.Get(i); }, [&](int64_t i) { return grad[i]; },
          2e-6, 1e-5)) {
    ADD_FAILURE() << input << ": dlogits[" << m.index / E << ", " << m.index % E << "] moved by " << m.got
                  << ", not by coeff E / T p_tj (f_j - sum_i f_i p_ti) (the gradient is added to dlogits, f "
                  << "held fixed); " << SeedNote();
  }
}

// With f frozen, LBL(z) = coeff E sum_i f_i mean_t softmax(z_t)_i: the gradient must match central
// differences. The choices are drawn and held fixed (as the top-k of z would be: counts do not move under a
// tiny step).
TEST(LoadBalancingLossHidden, GradientFlowsThroughProbabilitiesOnly) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(4, 8);
  const int E = static_cast<int>(rnd.Int(3, 6)), k = static_cast<int>(rnd.Int(1, std::min(E - 1, 3)));
  const double coeff = rnd.Real(0.2, 1.5);
  Tensor z = testutil::RandomTensor({T, E}, rnd.Next());
  std::vector<int32_t> choice;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> all(E);
    std::iota(all.begin(), all.end(), 0);
    rnd.Shuffle(all);
    choice.insert(choice.end(), all.begin(), all.begin() + k);
  }
  auto routing_of = [&](const Tensor& zz) {
    std::vector<float> p(T * E);
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int i = 0; i < E; ++i) s += p[t * E + i] = std::exp(zz.Get(t * E + i));
      for (int i = 0; i < E; ++i) p[t * E + i] /= s;
    }
    return MakeRouting(T, E, k, p, choice);
  };
  const std::string input = Str("micro-batch LBL, ", Shape(E, k, T, coeff),
                                ", logits drawn N(0, 1), experts ", List(choice), " held fixed");
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  Tensor dz({T, E});
  ASSERT_OK(lbl->Compute(routing_of(z), coeff, dz).status());
  const float eps = 1e-3f;
  std::vector<double> fd(T * E);
  for (int64_t i = 0; i < T * E; ++i) {
    Tensor zp = z, zm = z, scratch({T, E});
    zp.Set(i, z.Get(i) + eps);
    zm.Set(i, z.Get(i) - eps);
    ASSERT_OK_AND_ASSIGN(const double lp, lbl->Compute(routing_of(zp), coeff, scratch));
    ASSERT_OK_AND_ASSIGN(const double lm, lbl->Compute(routing_of(zm), coeff, scratch));
    fd[i] = (lp - lm) / (2 * eps);
  }
  if (auto m = FirstMismatch(
          T * E, [&](int64_t i) { return dz.Get(i); }, [&](int64_t i) { return fd[i]; }, 2e-4)) {
    ADD_FAILURE() << input << ": dlogits[" << m.index / E << ", " << m.index % E << "] = " << m.got
                  << " differs from the central difference of the loss (" << m.want << "); " << SeedNote();
  }
}

TEST(LoadBalancingLossHidden, RejectsMismatchedArguments) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(2, 8)), k = static_cast<int>(rnd.Int(1, E));
  const int64_t T = rnd.Int(1, 6);
  const int big_k = E + static_cast<int>(rnd.Int(1, 3));
  EXPECT_EQ(LoadBalancingLoss::Create(LblScope::kMicroBatch, E, big_k).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "LoadBalancingLoss::Create(E = " << E << ", k = " << big_k << "): k > E; " << SeedNote();
  const Routing r = Draw(rnd, T, E, k);
  int other_k = static_cast<int>(rnd.Int(1, E - 1));
  if (other_k >= k) ++other_k;  // any k in [1, E] but the routing's
  ASSERT_OK_AND_ASSIGN(auto wrong_k, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, other_k));
  Tensor dz({T, E});
  EXPECT_EQ(wrong_k->Compute(r, 1.0, dz).status().code(), absl::StatusCode::kInvalidArgument)
      << "a routing with k = " << k << " given to a loss made for k = " << other_k << " (E = " << E
      << ", T = " << T << "); " << SeedNote();
  const int other_e = E + static_cast<int>(rnd.Int(1, 3));
  ASSERT_OK_AND_ASSIGN(auto wrong_e, LoadBalancingLoss::Create(LblScope::kMicroBatch, other_e, k));
  Tensor dz_e({T, other_e});
  EXPECT_EQ(wrong_e->Compute(r, 1.0, dz_e).status().code(), absl::StatusCode::kInvalidArgument)
      << "a routing with E = " << E << " given to a loss made for E = " << other_e << " (k = " << k
      << ", T = " << T << "); " << SeedNote();
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  const bool more_rows = rnd.Chance(0.5);
  const int64_t rows = more_rows ? T + rnd.Int(1, 3) : T, cols = more_rows ? E : E + rnd.Int(1, 3);
  Tensor bad({rows, cols});
  EXPECT_EQ(lbl->Compute(r, 1.0, bad).status().code(), absl::StatusCode::kInvalidArgument)
      << "dlogits [" << rows << ", " << cols << "] for a routing of T = " << T << " tokens and E = " << E
      << " experts; " << SeedNote();
}

// Runs `body` on n ranks (the global-batch tests' ranks), five seconds at most.
absl::Status OnRanks(int n, const std::function<absl::Status(int, comm::Comm&, comm::Stream&)>& body) {
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  return comm::FirstError(comm::RunRanks(n, body, opt));
}

// n ranks, T tokens each: the rank-mean of global-batch LBL equals the LBL of the concatenated batch on one
// rank, f is the same on every rank and equal to the concatenated batch's, P stays local, and rank r's
// gradient is n times the concatenated batch's gradient on its rows (the DP average brings it back).
TEST(GlobalBatchLossHidden, EqualsSingleRankLossOfConcatenatedBatch) {
  CaseRandom rnd;
  const int n = static_cast<int>(rnd.Int(2, 4)), E = static_cast<int>(rnd.Int(3, 6));
  const int k = static_cast<int>(rnd.Int(2, std::min(E, 3)));
  const int64_t T = rnd.Int(3, 7);
  const double coeff = rnd.Real(0.3, 1.5);
  std::vector<Routing> local;
  for (int r = 0; r < n; ++r) local.push_back(Draw(rnd, T, E, k));
  Routing all = local[0];
  all.tokens = n * T;
  for (int r = 1; r < n; ++r) {
    all.probs.insert(all.probs.end(), local[r].probs.begin(), local[r].probs.end());
    all.expert.insert(all.expert.end(), local[r].expert.begin(), local[r].expert.end());
    all.gate.insert(all.gate.end(), local[r].gate.begin(), local[r].gate.end());
    all.kept.insert(all.kept.end(), local[r].kept.begin(), local[r].kept.end());
  }
  std::string input = Str("global-batch LBL on n = ", n, " ranks of ", Shape(E, k, T, coeff),
                          " each; counts per expert by rank");
  for (int r = 0; r < n; ++r) input += " " + List(Counts(local[r]));
  ASSERT_OK_AND_ASSIGN(auto single, LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k));
  Tensor dz_all({n * T, E});
  ASSERT_OK_AND_ASSIGN(double want, single->Compute(all, coeff, dz_all));
  const std::vector<double> f_all = Fractions(Counts(all), k, n * T);
  const std::vector<double> grad_all = LblGradient(all, coeff, f_all);
  ASSERT_TRUE(std::fabs(want - Lbl(coeff, f_all, MeanProbs(all))) <= 1e-6 * std::max(1.0, std::fabs(want)))
      << "the micro-batch LBL of the concatenated batch (one rank) is " << want
      << ", not coeff E sum_i f_i P_i; " << input << "; " << SeedNote();

  std::vector<double> loss(n);
  std::vector<std::vector<double>> f(n), P(n);
  std::vector<Tensor> dz(n);
  std::mutex mu;
  testing::Activity activity("global-batch LBL on n ranks (one all-reduce each)");
  ASSERT_OK(OnRanks(n,
                    [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
                      auto lbl = LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k, &c, &s);
                      if (!lbl.ok()) return lbl.status();
                      Tensor d({T, E});
                      auto l = (*lbl)->Compute(local[rank], coeff, d);
                      if (!l.ok()) return l.status();
                      std::lock_guard<std::mutex> lock(mu);
                      loss[rank] = *l, f[rank] = (*lbl)->fractions(), P[rank] = (*lbl)->mean_probs(),
                      dz[rank] = d;
                      return absl::OkStatus();
                    }))
      << input << "; " << SeedNote();
  double mean = 0;
  for (int r = 0; r < n; ++r) mean += loss[r] / n;
  EXPECT_TRUE(std::fabs(mean - want) <= 1e-6 * std::max(1.0, std::fabs(want)))
      << "the mean over ranks of the global-batch LBL (" << mean
      << ") is not the LBL of the concatenated batch on one rank; " << input << "; " << SeedNote();
  for (int r = 0; r < n; ++r) {
    ExpectFractions(f[r], f_all, Str("rank ", r, " (every rank's f is the concatenated batch's)"), input);
    const std::vector<double> P_local = MeanProbs(local[r]);
    ASSERT_EQ(P[r].size(), static_cast<size_t>(E)) << "rank " << r << "; " << input << "; " << SeedNote();
    if (auto m = FirstMismatch(
            E, [&](int64_t i) { return P[r][i]; }, [&](int64_t i) { return P_local[i]; }, 1e-7)) {
      ADD_FAILURE() << "rank " << r << ": P_" << m.index << " = " << m.got
                    << " is not the mean over the rank's own tokens (P stays local); " << input << "; "
                    << SeedNote();
    }
    const double local_loss = Lbl(coeff, f_all, P_local);
    EXPECT_TRUE(std::fabs(loss[r] - local_loss) <= 1e-6 * std::max(1.0, std::fabs(local_loss)))
        << "rank " << r << ": the loss is " << loss[r] << ", not coeff E sum_i f_global,i P_local,i; "
        << input << "; " << SeedNote();
    ASSERT_EQ(dz[r].numel(), T * E) << "rank " << r << "; " << input << "; " << SeedNote();
    if (auto m = FirstMismatch(
            T * E, [&](int64_t i) { return dz[r].Get(i) / n; },
            [&](int64_t i) { return grad_all[r * T * E + i]; }, 1e-6, 1e-5)) {
      ADD_FAILURE() << "rank " << r << ": dlogits[" << m.index / E << ", " << m.index % E
                    << "] / n = " << m.got << " is not the concatenated batch's gradient on that token; "
                    << input << "; " << SeedNote();
    }
  }
}

// M micro-batches of one step, one at a time.
struct Step {
  std::vector<Routing> micro;
};

Step DrawStep(CaseRandom& rnd, int M, int E, int k) {
  Step s;
  for (int m = 0; m < M; ++m) s.micro.push_back(Draw(rnd, rnd.Int(1, 6), E, k));
  return s;
}

std::string Describe(const Step& s) {
  std::string out;
  for (const Routing& r : s.micro)
    out += Str(out.empty() ? "" : ", ", "T = ", r.tokens, " counts ", List(Counts(r)));
  return "{" + out + "}";
}

// One rank, global scope: f accumulates over the micro-batches of a step (the gradient-accumulation batch of
// the step so far), also with dp null; the loss is coeff E sum_i f_i P_i with P the micro-batch's own.
TEST(GlobalBatchLossHidden, OneRankAccumulatesOverTheMicroBatchesOfAStep) {
  CaseRandom rnd;
  // Top-1, as in BufferRestartsAfterOptimizerStep: how k enters f is the other cases' to check.
  const int E = static_cast<int>(rnd.Int(2, 6)), k = 1;
  const int M = static_cast<int>(rnd.Int(2, 4));
  const double coeff = rnd.Real(0.3, 1.5);
  Step step;
  for (int attempt = 0;; ++attempt) {  // until some micro-batch's f over the step so far differs from its own
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
    step = DrawStep(rnd, M, E, k);
    std::vector<double> sum(E, 0.0);
    double tokens = 0;
    bool differs = false;
    for (const Routing& r : step.micro) {
      const std::vector<double> c = Counts(r);
      for (int i = 0; i < E; ++i) sum[i] += c[i];
      tokens += r.tokens;
      const std::vector<double> acc = Fractions(sum, k, tokens), alone = Fractions(c, k, r.tokens);
      for (int i = 0; i < E; ++i) differs = differs || std::fabs(acc[i] - alone[i]) > 1e-6;
    }
    if (differs) break;
  }
  const std::string input = Str("one rank (dp null), global scope, E = ", E, ", k = ", k, ", coeff ", coeff,
                                ", micro-batches ", Describe(step));
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k));
  std::vector<double> sum(E, 0.0);
  double tokens = 0;
  for (int m = 0; m < M; ++m) {
    const Routing& r = step.micro[m];
    Tensor d({r.tokens, E});
    ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(r, coeff, d));
    const std::vector<double> c = Counts(r);
    for (int i = 0; i < E; ++i) sum[i] += c[i];
    tokens += r.tokens;
    const std::vector<double> f = Fractions(sum, k, tokens);
    ExpectFractions(
        lbl->fractions(), f,
        Str("after micro-batch ", m, " (f counts micro-batches 0..", m, " of the step: ", tokens, " tokens)"),
        input);
    const double want = Lbl(coeff, f, MeanProbs(r));
    EXPECT_TRUE(std::fabs(loss - want) <= 1e-6 * std::max(1.0, std::fabs(want)))
        << "micro-batch " << m << ": the loss is " << loss
        << ", not coeff E sum_i f_i P_i with the step's f and the micro-batch's own P; " << input << "; "
        << SeedNote();
  }
}

// One rank, global scope: OnOptimizerStep empties the buffer, so the next step's f counts its own
// micro-batch only.
TEST(GlobalBatchLossHidden, BufferRestartsAfterOptimizerStep) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(2, 6)), k = 1;
  Step first;
  Routing next;
  for (int attempt = 0;; ++attempt) {  // until keeping step 1's counts would change step 2's f
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
    first = DrawStep(rnd, static_cast<int>(rnd.Int(1, 3)), E, k);
    next = Draw(rnd, rnd.Int(1, 6), E, k);
    std::vector<double> sum = Counts(next);
    double tokens = next.tokens;
    for (const Routing& r : first.micro) {
      const std::vector<double> c = Counts(r);
      for (int i = 0; i < E; ++i) sum[i] += c[i];
      tokens += r.tokens;
    }
    const std::vector<double> kept = Fractions(sum, k, tokens),
                              fresh = Fractions(Counts(next), k, next.tokens);
    bool differs = false;
    for (int i = 0; i < E; ++i) differs = differs || std::fabs(kept[i] - fresh[i]) > 1e-6;
    if (differs) break;
  }
  const std::string input =
      Str("one rank, global scope, E = ", E, ", k = ", k, ", step 1's micro-batches ", Describe(first),
          ", then OnOptimizerStep, then one micro-batch T = ", next.tokens, " counts ", List(Counts(next)));
  ASSERT_OK_AND_ASSIGN(auto lbl, LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k));
  for (const Routing& r : first.micro) {
    Tensor d({r.tokens, E});
    ASSERT_OK(lbl->Compute(r, 1.0, d).status());
  }
  lbl->OnOptimizerStep();
  Tensor d({next.tokens, E});
  ASSERT_OK_AND_ASSIGN(double loss, lbl->Compute(next, 1.0, d));
  const std::vector<double> f = Fractions(Counts(next), k, next.tokens);
  ExpectFractions(lbl->fractions(), f,
                  "after OnOptimizerStep the buffer must restart: step 2's f counts step 2", input);
  const double want = Lbl(1.0, f, MeanProbs(next));
  EXPECT_TRUE(std::fabs(loss - want) <= 1e-6 * std::max(1.0, std::fabs(want)))
      << "step 2's loss is " << loss << ", not E sum_i f_i P_i of its own micro-batch; " << input << "; "
      << SeedNote();
}

// Two ranks, two micro-batches each (top-1, the same T everywhere): after the second micro-batch f covers all
// four micro-batches; micro scope sees the rank's last micro-batch alone.
TEST(GlobalBatchLossHidden, TwoRanksTwoMicroBatches) {
  CaseRandom rnd;
  const int n = 2, E = static_cast<int>(rnd.Int(2, 6)), k = 1;
  const int64_t T = rnd.Int(1, 5);
  std::vector<Routing> mb;  // (rank, m) -> routing, at rank * 2 + m
  for (int i = 0; i < 4; ++i) mb.push_back(Draw(rnd, T, E, k));
  std::string input = Str("two ranks, two micro-batches each of T = ", T, " tokens, E = ", E,
                          ", top-1; experts by (rank, micro-batch):");
  for (int i = 0; i < 4; ++i) input += Str(" (", i / 2, ", ", i % 2, ") ", List(mb[i].expert));
  std::vector<std::vector<double>> first(n), second(n), micro(n);
  std::mutex mu;
  ASSERT_OK(OnRanks(n,
                    [&](int rank, comm::Comm& cm, comm::Stream& s) -> absl::Status {
                      auto g = LoadBalancingLoss::Create(LblScope::kGlobalBatch, E, k, &cm, &s);
                      auto mbl = LoadBalancingLoss::Create(LblScope::kMicroBatch, E, k, &cm, &s);
                      if (!g.ok()) return g.status();
                      if (!mbl.ok()) return mbl.status();
                      std::vector<std::vector<double>> f;
                      for (int m = 0; m < 2; ++m) {
                        Tensor d({T, E}), d2({T, E});
                        auto l = (*g)->Compute(mb[rank * 2 + m], 1.0, d);
                        if (!l.ok()) return l.status();
                        f.push_back((*g)->fractions());
                        auto l2 = (*mbl)->Compute(mb[rank * 2 + m], 1.0, d2);
                        if (!l2.ok()) return l2.status();
                      }
                      std::lock_guard<std::mutex> lock(mu);
                      first[rank] = f[0], second[rank] = f[1], micro[rank] = (*mbl)->fractions();
                      return absl::OkStatus();
                    }))
      << input << "; " << SeedNote();
  std::vector<double> c0(E, 0.0), c1(E, 0.0);
  for (int i = 0; i < 4; ++i) {
    const std::vector<double> c = Counts(mb[i]);
    for (int e = 0; e < E; ++e) (i % 2 == 0 ? c0 : c1)[e] += c[e];
  }
  std::vector<double> both = c0;
  for (int e = 0; e < E; ++e) both[e] += c1[e];
  for (int r = 0; r < n; ++r) {
    ExpectFractions(first[r], Fractions(c0, k, 2.0 * T),
                    Str("rank ", r, " after micro-batch 0 (f counts micro-batch 0 of both ranks)"), input);
    ExpectFractions(second[r], Fractions(both, k, 4.0 * T),
                    Str("rank ", r, " after micro-batch 1 (f counts all four micro-batches)"), input);
    ExpectFractions(micro[r], Fractions(Counts(mb[r * 2 + 1]), k, T),
                    Str("micro scope, rank ", r, " (its last micro-batch alone)"), input);
  }
}

// n ranks with unequal T, top-k with k >= 2: every rank runs one global-batch Compute; returns each rank's
// fractions and its comm statistics for that Compute.
struct UnequalT {
  int n = 0, E = 0, k = 0;
  std::vector<int64_t> tokens;
  std::vector<Routing> local;
  std::vector<double> counts;  // over the concatenated batch
  int64_t total = 0;
  std::vector<std::vector<double>> f;
  std::vector<comm::Stats> stats;
  std::string input;
};

void RunUnequalT(UnequalT& u) {
  CaseRandom rnd;
  u.n = static_cast<int>(rnd.Int(2, 4)), u.E = static_cast<int>(rnd.Int(3, 6));
  u.k = static_cast<int>(rnd.Int(2, std::min(u.E, 3)));
  do {
    u.tokens.clear();
    for (int r = 0; r < u.n; ++r) u.tokens.push_back(rnd.Int(1, 6));
  } while (std::equal(u.tokens.begin() + 1, u.tokens.end(), u.tokens.begin()));
  for (int r = 0; r < u.n; ++r) u.local.push_back(Draw(rnd, u.tokens[r], u.E, u.k));
  u.counts.assign(u.E, 0);
  for (const Routing& r : u.local) {
    for (int32_t e : r.expert) u.counts[e] += 1;
    u.total += r.tokens;
  }
  u.input = Str("global-batch LBL on n = ", u.n, " ranks with T = ", List(u.tokens), ", E = ", u.E,
                ", k = ", u.k, ", counts per expert by rank");
  for (const Routing& r : u.local) u.input += " " + List(Counts(r));
  u.f.resize(u.n);
  u.stats.resize(u.n);
  std::mutex mu;
  testing::Activity activity("global-batch LBL on n ranks with unequal T");
  ASSERT_OK(OnRanks(u.n,
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
                    }))
      << u.input << "; " << SeedNote();
}

// f is the concatenated batch's on every rank, although T differs: counts / (k * total T), summing to 1.
TEST(GlobalBatchLossHidden, FractionsOfTheConcatenatedBatchWithUnequalT) {
  UnequalT u;
  ASSERT_NO_FATAL_FAILURE(RunUnequalT(u));
  const std::vector<double> want = Fractions(u.counts, u.k, u.total);
  for (int r = 0; r < u.n; ++r) {
    ExpectFractions(u.f[r], want,
                    Str("rank ", r, " (the counts of all ranks over k times the tokens of all ranks)"),
                    u.input);
    double sum = 0;
    for (double v : u.f[r]) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-12) << "rank " << r << ": the fractions must sum to 1; " << u.input << "; "
                                 << SeedNote();
  }
}

// One AllReduce of E + 1 numbers per Compute (the counts and T), nothing else: P stays local.
TEST(GlobalBatchLossHidden, OneAllReduceOfCountsAndTokensPerCompute) {
  UnequalT u;
  ASSERT_NO_FATAL_FAILURE(RunUnequalT(u));
  for (int r = 0; r < u.n; ++r) {
    EXPECT_EQ(u.stats[r].collective_calls, 1u)
        << "rank " << r << " ran " << u.stats[r].collective_calls
        << " collectives; one all-reduce per Compute; " << u.input << "; " << SeedNote();
    EXPECT_TRUE(u.stats[r].collective_bytes == (u.E + 1) * 8u ||
                u.stats[r].collective_bytes == (u.E + 1) * 4u)
        << "rank " << r << " all-reduced " << u.stats[r].collective_bytes << " bytes, not E + 1 = " << u.E + 1
        << " numbers; " << u.input << "; " << SeedNote();
  }
}

// z-loss = coeff (1/T) sum_t lse_t^2, and dz[t, i] += coeff 2 lse_t softmax(z_t)_i / T.
TEST(ZLossHidden, HandComputedValueAndGradient) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(1, 6);
  const int E = static_cast<int>(rnd.Int(2, 8));
  const double coeff = rnd.Real(0.01, 1.0), offset = rnd.Real(-3, 3);
  Tensor z = testutil::RandomTensor({T, E}, rnd.Next(), 2.f);
  for (int64_t i = 0; i < z.numel(); ++i) z.Set(i, z.Get(i) + static_cast<float>(offset));
  const Tensor before = testutil::RandomTensor({T, E}, rnd.Next());
  const std::string input = Str("ZLoss(logits [", T, ", ", E, "] drawn N(", offset, ", 2^2), coeff ", coeff,
                                "), dlogits holding N(0, 1) values before the call");
  Tensor dz = before;
  ASSERT_OK_AND_ASSIGN(double loss, ZLoss(z, coeff, dz));
  double want = 0;
  std::vector<double> grad(T * E);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> row = testutil::Row(z, t);
    const double zmax = *std::max_element(row.begin(), row.end());
    double s = 0;
    for (double v : row) s += std::exp(v - zmax);
    const double lse = zmax + std::log(s);
    want += coeff * lse * lse / T;
    for (int i = 0; i < E; ++i) grad[t * E + i] = coeff * 2 * lse * std::exp(row[i] - lse) / T;
  }
  EXPECT_TRUE(std::fabs(loss - want) <= 1e-6 * std::max(1.0, std::fabs(want)))
      << input << ": the z-loss is " << loss << ", not coeff (1/T) sum_t logsumexp(z_t)^2; " << SeedNote();
  if (auto m = FirstMismatch(
          T * E, [&](int64_t i) { return dz.Get(i) - before.Get(i); }, [&](int64_t i) { return grad[i]; },
          2e-6, 1e-5)) {
    ADD_FAILURE() << input << ": dlogits[" << m.index / E << ", " << m.index % E << "] moved by " << m.got
                  << ", not by the z-loss's gradient (the gradient is added to dlogits); " << SeedNote();
  }
}

}  // namespace
}  // namespace distlab::moe
