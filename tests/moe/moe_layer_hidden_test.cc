// Lab 6 stage A, hidden: routing (softmax, top-k, gates), its backward, the layer against a dense
// per-token loop, and the layer's gradients against finite differences.
//
// Every case but the worked example of the tie-break rule (RouteHidden.TopTwoNormalizedGatesByHand, whose
// values the header's rule gives) draws its sizes, logits, weights and inputs from the grading seed
// (distlab::testing::CaseRandom); a failure names the input and ends with how to draw it again. Real-valued
// draws make ties between probabilities (practically) impossible, and the cases that perturb logits redraw
// until no perturbation can change the top-k choice.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/moe_layer.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testing::CaseRandom;
using testing::SeedNote;
using testutil::FirstMismatch;
using testutil::RandomTensor;
using testutil::Str;

Tensor LogitsOf(std::vector<std::vector<double>> weights) {
  // logits = log(weights): the softmax is weights / sum(weights), easy to compute by hand.
  const int64_t T = weights.size(), E = weights[0].size();
  Tensor z({T, E});
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < E; ++i) z.Set(t * E + i, static_cast<float>(std::log(weights[t][i])));
  }
  return z;
}

TEST(RouteHidden, TopTwoNormalizedGatesByHand) {
  // token 0: p = [1 2 4 1]/8 -> experts (2, 1), gates (4/6, 2/6)
  // token 1: p = [3 1 1 3]/8 -> tie between 0 and 3: lower index first -> (0, 3), gates (1/2, 1/2)
  ASSERT_OK_AND_ASSIGN(Routing r, Route(LogitsOf({{1, 2, 4, 1}, {3, 1, 1, 3}}), 2, true));
  ASSERT_EQ(r.tokens, 2);
  ASSERT_EQ(r.experts, 4);
  ASSERT_EQ(r.top_k, 2);
  const std::vector<float> p = {0.125f, 0.25f, 0.5f, 0.125f, 0.375f, 0.125f, 0.125f, 0.375f};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(r.probs[i], p[i], 1e-6) << "probs[" << i << "]";
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 1, 0, 3}));
  EXPECT_NEAR(r.gate[0], 4.0 / 6, 1e-6);
  EXPECT_NEAR(r.gate[1], 2.0 / 6, 1e-6);
  EXPECT_NEAR(r.gate[2], 0.5, 1e-6);
  EXPECT_NEAR(r.gate[3], 0.5, 1e-6);
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{1, 1, 1, 1}));
}

// Raw gates (normalize_gates = false) are the chosen probabilities; a top-1 renormalised gate is 1.
TEST(RouteHidden, UnnormalizedGatesAreProbabilities) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(1, 6);
  const int E = static_cast<int>(rnd.Int(2, 8));
  const int k = static_cast<int>(rnd.Int(1, E));
  Tensor z;
  do {  // real-valued logits, redrawn in the (unlikely) case two of a row's top k + 1 nearly tie
    z = RandomTensor({T, E}, rnd.Next(), 1.5f);
  } while ([&] {
    for (int64_t t = 0; t < T; ++t) {
      if (testutil::TopKMargin(testutil::Row(z, t), k) < 1e-3) return true;
    }
    return false;
  }());
  const std::string input = Str("Route(logits [", T, ", ", E, "] drawn N(0, 1.5^2), k = ", k, ")");
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, k, false));
  EXPECT_FALSE(r.normalized) << input << " with normalize_gates = false must say so; " << SeedNote();
  ASSERT_EQ(r.probs.size(), static_cast<size_t>(T * E)) << input << "; " << SeedNote();
  ASSERT_EQ(r.expert.size(), static_cast<size_t>(T * k)) << input << "; " << SeedNote();
  ASSERT_EQ(r.gate.size(), static_cast<size_t>(T * k)) << input << "; " << SeedNote();
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<double> p = testutil::SoftmaxRef(testutil::Row(z, t));
    if (auto m = FirstMismatch(
            E, [&](int64_t i) { return r.probs[t * E + i]; }, [&](int64_t i) { return p[i]; }, 1e-6)) {
      ADD_FAILURE() << input << ": probs[" << t << ", " << m.index << "] = " << m.got
                    << " is not the softmax of the token's logits; " << SeedNote();
      return;
    }
    const std::vector<int> want = testutil::TopK(p, k);
    for (int j = 0; j < k; ++j) {
      if (r.expert[t * k + j] != want[j]) {
        ADD_FAILURE() << input << ": token " << t << " slot " << j << " chose expert " << r.expert[t * k + j]
                      << "; the slots hold the k most probable experts, most probable first; " << SeedNote();
        return;
      }
      if (!(std::fabs(r.gate[t * k + j] - p[want[j]]) <= 1e-6)) {
        ADD_FAILURE() << input << ": gate[" << t << ", " << j << "] = " << r.gate[t * k + j]
                      << ", not the chosen expert's probability (raw gates are not renormalised); "
                      << SeedNote();
        return;
      }
    }
  }
  const std::string top1 = Str("Route(logits [", T, ", ", E, "] drawn N(0, 1.5^2), k = 1, normalize_gates)");
  ASSERT_OK_AND_ASSIGN(Routing one, Route(z, 1, true));
  ASSERT_EQ(one.expert.size(), static_cast<size_t>(T)) << top1 << "; " << SeedNote();
  ASSERT_EQ(one.gate.size(), static_cast<size_t>(T)) << top1 << "; " << SeedNote();
  for (int64_t t = 0; t < T; ++t) {
    const int want = testutil::TopK(testutil::SoftmaxRef(testutil::Row(z, t)), 1)[0];
    EXPECT_EQ(one.expert[t], want) << top1 << ": token " << t << " must choose its most probable expert; "
                                   << SeedNote();
    EXPECT_NEAR(one.gate[t], 1.0, 1e-6)
        << top1 << ": a renormalised top-1 gate is always 1 (token " << t << "); " << SeedNote();
  }
}

// Logits of magnitude 750 to 3000 (beyond what exp can take even in double), positive or negative:
// probabilities stay finite and equal the softmax of the logits with the row's maximum subtracted.
TEST(RouteHidden, LargeLogitsStayFinite) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(1, 4);
  const int E = static_cast<int>(rnd.Int(2, 6));
  const int k = static_cast<int>(rnd.Int(1, E));
  const bool normalized = rnd.Chance(0.5);
  const double magnitude = rnd.Real(750, 3000);  // one draw per statement: a fixed order of draws
  const double base = rnd.Chance(0.5) ? magnitude : -magnitude;
  Tensor z({T, E});
  do {  // redrawn in the (unlikely) case a row's two largest logits round to nearly the same float
    for (int64_t i = 0; i < T * E; ++i) z.Set(i, static_cast<float>(base + rnd.Real(-4, 4)));
  } while ([&] {
    for (int64_t t = 0; t < T; ++t) {
      if (testutil::TopKMargin(testutil::Row(z, t), 1) < 1e-2) return true;
    }
    return false;
  }());
  const std::string input =
      Str("Route(logits [", T, ", ", E, "] of about ", static_cast<int64_t>(base),
          " (each within 4 of it), k = ", k, ", normalize_gates = ", normalized ? "true" : "false", ")");
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, k, normalized));
  ASSERT_EQ(r.probs.size(), static_cast<size_t>(T * E)) << input << "; " << SeedNote();
  ASSERT_EQ(r.gate.size(), static_cast<size_t>(T * k)) << input << "; " << SeedNote();
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<double> p = testutil::SoftmaxRef(testutil::Row(z, t));
    if (auto m = FirstMismatch(
            E, [&](int64_t i) { return r.probs[t * E + i]; }, [&](int64_t i) { return p[i]; }, 1e-6)) {
      ADD_FAILURE() << input << ": probs[" << t << ", " << m.index << "] = " << m.got
                    << (std::isfinite(m.got) ? ", not the softmax of the logits" : ": exp overflowed") << "; "
                    << SeedNote();
      return;
    }
    EXPECT_EQ(r.expert[t * k], testutil::TopK(p, 1)[0])
        << input << ": token " << t << "'s first slot must be its most probable expert; " << SeedNote();
    for (int j = 0; j < k; ++j) {
      EXPECT_TRUE(std::isfinite(r.gate[t * k + j]))
          << input << ": gate[" << t << ", " << j << "] is not finite; " << SeedNote();
    }
  }
}

// Every class of bad argument is InvalidArgument: k < 1, k > E, logits that are not [T, E].
TEST(RouteHidden, RejectsBadArguments) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(1, 5);
  const int E = static_cast<int>(rnd.Int(1, 8));
  const Tensor z = RandomTensor({T, E}, rnd.Next());
  const int small_k = -static_cast<int>(rnd.Int(0, 2)), big_k = E + static_cast<int>(rnd.Int(1, 3));
  EXPECT_EQ(Route(z, small_k, true).status().code(), absl::StatusCode::kInvalidArgument)
      << "Route(logits [" << T << ", " << E << "], k = " << small_k << "): k < 1; " << SeedNote();
  EXPECT_EQ(Route(z, big_k, rnd.Chance(0.5)).status().code(), absl::StatusCode::kInvalidArgument)
      << "Route(logits [" << T << ", " << E << "], k = " << big_k << "): k > E; " << SeedNote();
  const int64_t n = rnd.Int(1, 12);
  EXPECT_EQ(Route(Tensor({n}), 1, true).status().code(), absl::StatusCode::kInvalidArgument)
      << "Route(logits [" << n << "], k = 1): logits must be [T, E]; " << SeedNote();
  const int64_t a = rnd.Int(1, 3), b = rnd.Int(1, 3), c = rnd.Int(1, 3);
  EXPECT_EQ(Route(Tensor({a, b, c}), 1, true).status().code(), absl::StatusCode::kInvalidArgument)
      << "Route(logits [" << a << ", " << b << ", " << c << "], k = 1): logits must be [T, E]; "
      << SeedNote();
}

// L(z) = sum_{t,j} w[t,j] * gate[t,j](z) with the choice frozen; RouterBackward(w) must be dL/dz. Drawn: T,
// E, k (k >= 2 with renormalised gates, where the renormalisation has a gradient), the logits (redrawn until
// no step of the finite difference changes the choice) and w.
void CheckRouterBackward(bool normalized) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(2, 5);
  const int E = static_cast<int>(rnd.Int(3, 7));
  const int k = static_cast<int>(rnd.Int(normalized ? 2 : 1, std::min(E - 1, 3)));
  const float eps = 5e-3f;
  Tensor z;
  do {
    z = RandomTensor({T, E}, rnd.Next());
  } while ([&] {
    for (int64_t t = 0; t < T; ++t) {
      if (testutil::TopKMargin(testutil::Row(z, t), k) < 6 * eps) return true;
    }
    return false;
  }());
  std::vector<float> w(T * k);
  for (float& v : w) v = static_cast<float>(rnd.Real(-1.5, 1.5));
  const std::string input =
      Str("RouterBackward with ", normalized ? "renormalised" : "raw", " gates, T = ", T, ", E = ", E,
          ", k = ", k, ", logits drawn N(0, 1), dgate drawn in [-1.5, 1.5]");
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, k, normalized));
  ASSERT_OK_AND_ASSIGN(Tensor dz, RouterBackward(r, w));
  ASSERT_EQ(dz.shape(), (tensor::Shape{T, E})) << input << "; " << SeedNote();
  auto L = [&](const Tensor& zz) {
    Routing rr = Route(zz, k, normalized).value();
    double s = 0;
    for (int i = 0; i < T * k; ++i) s += w[i] * rr.gate[i];
    return s;
  };
  std::vector<double> fd(T * E);
  for (int64_t i = 0; i < T * E; ++i) {
    Tensor zp = z, zm = z;
    zp.Set(i, z.Get(i) + eps);
    zm.Set(i, z.Get(i) - eps);
    fd[i] = (L(zp) - L(zm)) / (2 * eps);
  }
  if (auto m = FirstMismatch(
          T * E, [&](int64_t i) { return dz.Get(i); }, [&](int64_t i) { return fd[i]; }, 2e-3)) {
    ADD_FAILURE() << input << ": dlogits[" << m.index / E << ", " << m.index % E << "] = " << m.got
                  << " differs from the central difference of sum_{t,j} dgate[t,j] gate[t,j] (" << m.want
                  << "); " << SeedNote();
  }
}

TEST(RouterBackwardHidden, NormalizedMatchesFiniteDifferences) { CheckRouterBackward(true); }
TEST(RouterBackwardHidden, UnnormalizedMatchesFiniteDifferences) { CheckRouterBackward(false); }

struct LayerDraw {
  MoeConfig config;
  uint64_t router_seed = 0, x_seed = 0;
  int64_t T = 0;
  float router_std = 1.0f;
  std::string Describe() const {
    return Str("MoeLayer {h = ", config.hidden, ", f = ", config.inner, ", E = ", config.experts,
               ", k = ", config.top_k, ", ", config.normalize_gates ? "renormalised" : "raw",
               " gates}, router weights drawn N(0, ", router_std, "^2), T = ", T, " tokens drawn N(0, 1)");
  }
};

MoeConfig DrawConfig(CaseRandom& rnd, int k, bool normalized, int64_t h_lo, int64_t h_hi, int64_t f_lo,
                     int64_t f_hi, int e_lo, int e_hi) {
  MoeConfig c;
  c.hidden = rnd.Int(h_lo, h_hi), c.inner = rnd.Int(f_lo, f_hi);
  c.experts = static_cast<int>(rnd.Int(e_lo, e_hi));
  c.top_k = k, c.normalize_gates = normalized, c.seed = rnd.Next();
  return c;
}

// The smallest top-k margin of the router's logits (in double) over the tokens of x, and how many experts
// the tokens choose.
std::pair<double, int> RouterMargin(MoeLayer& layer, const Tensor& x, int k) {
  double margin = HUGE_VAL;
  std::vector<int> used(layer.config().experts, 0);
  for (int64_t t = 0; t < x.dim(0); ++t) {
    std::vector<double> z = testutil::LinearRef(layer.router().weight().value, nullptr, testutil::Row(x, t));
    margin = std::min(margin, testutil::TopKMargin(z, k));
    for (int e : testutil::TopK(z, k)) used[e] = 1;
  }
  return {margin, static_cast<int>(std::count(used.begin(), used.end(), 1))};
}

// The dense reference: every token on its own, in double. Drawn: h, f, E, T, the layer's seed, the router's
// weights (of order 1, so the routing is far from uniform) and x, redrawn until the tokens use several
// experts and no top-k choice is a near tie.
void CheckAgainstDenseLoop(int k, bool normalized) {
  CaseRandom rnd;
  LayerDraw d;
  d.config = DrawConfig(rnd, k, normalized, 3, 8, 4, 12, std::max(3, k + 1), 6);
  d.T = rnd.Int(6, 12);
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(d.config));
  const int64_t T = d.T, h = d.config.hidden;
  Tensor x;
  for (int attempt = 0;; ++attempt) {
    d.router_seed = rnd.Next(), d.x_seed = rnd.Next();
    tensor::FillNormal(layer->router().weight().value, d.router_seed, 1.0f);
    x = RandomTensor({T, h}, d.x_seed);
    const auto [margin, used] = RouterMargin(*layer, x, k);
    if (margin > 1e-3 && used >= std::min(k + 1, d.config.experts)) break;
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
  }
  const std::string input = d.Describe();
  ASSERT_OK_AND_ASSIGN(Tensor y, layer->Forward(x));
  ASSERT_EQ(y.shape(), x.shape()) << input << "; " << SeedNote();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> xt = testutil::Row(x, t);
    std::vector<double> p =
        testutil::SoftmaxRef(testutil::LinearRef(layer->router().weight().value, nullptr, xt));
    std::vector<int> order = testutil::TopK(p, k);
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += p[order[j]];
    std::vector<double> yt = xt;
    for (int j = 0; j < k; ++j) {
      const double g = normalized ? p[order[j]] / chosen : p[order[j]];
      std::vector<double> o = testutil::ExpertRef(*layer, order[j], xt);
      for (int64_t c = 0; c < h; ++c) yt[c] += g * o[c];
    }
    if (auto m = FirstMismatch(
            h, [&](int64_t c) { return y.Get(t * h + c); }, [&](int64_t c) { return yt[c]; }, 2e-5, 2e-5)) {
      ADD_FAILURE() << input << ": y[" << t << ", " << m.index << "] = " << m.got
                    << " differs from the dense per-token loop x[t] + sum_j gate_j Expert_{e_j}(x[t]) ("
                    << m.want << "); " << SeedNote();
      return;
    }
  }
}

TEST(MoeLayerHidden, TopOneMatchesDenseTokenLoop) { CheckAgainstDenseLoop(1, false); }
TEST(MoeLayerHidden, TopTwoNormalizedMatchesDenseTokenLoop) { CheckAgainstDenseLoop(2, true); }

// L = sum w * y. Checks dx and the router's gradient against central differences. Drawn: h, f, E, k (2 or
// 3, renormalised gates), T, the weights and x (redrawn until no step of the finite difference changes a
// choice) and w.
TEST(MoeLayerHidden, GradientsMatchFiniteDifferences) {
  CaseRandom rnd;
  const int k = static_cast<int>(rnd.Int(2, 3));
  LayerDraw d;
  d.config = DrawConfig(rnd, k, true, 4, 6, 6, 12, k + 1, 5);
  d.T = rnd.Int(3, 5);
  d.router_std = 0.5f;  // a routing not too peaked, so the renormalisation's gradient shows
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(d.config));
  const int64_t T = d.T, h = d.config.hidden;
  const float eps = 2e-3f;
  Tensor x;
  for (int attempt = 0;; ++attempt) {
    d.router_seed = rnd.Next(), d.x_seed = rnd.Next();
    tensor::FillNormal(layer->router().weight().value, d.router_seed, d.router_std);
    x = RandomTensor({T, h}, d.x_seed);
    // A step of eps in one input or one router weight moves a logit by at most eps * (its largest factor).
    double largest = 0;
    for (int64_t i = 0; i < x.numel(); ++i) largest = std::max<double>(largest, std::fabs(x.Get(i)));
    const Tensor& W = layer->router().weight().value;
    for (int64_t i = 0; i < W.numel(); ++i) largest = std::max<double>(largest, std::fabs(W.Get(i)));
    if (RouterMargin(*layer, x, k).first > 10 * eps * largest) break;
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
  }
  Tensor w = RandomTensor({T, h}, rnd.Next());
  const std::string input = Str(d.Describe(), ", L = sum w * y with w drawn N(0, 1)");
  auto loss = [&](const Tensor& xx) {
    Tensor y = layer->Forward(xx).value();
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(w.Get(i)) * y.Get(i);
    return s;
  };
  nn::ZeroGrads(layer->Parameters());
  ASSERT_OK(layer->Forward(x).status());
  const Routing routed = layer->routing();
  ASSERT_OK_AND_ASSIGN(Tensor dx, layer->Backward(w));
  ASSERT_EQ(dx.shape(), x.shape()) << input << "; " << SeedNote();
  Tensor dW = layer->router().weight().grad;
  std::vector<double> fd(T * h);
  for (int64_t i = 0; i < T * h; ++i) {
    Tensor xp = x, xm = x;
    xp.Set(i, x.Get(i) + eps);
    xm.Set(i, x.Get(i) - eps);
    fd[i] = (loss(xp) - loss(xm)) / (2 * eps);
  }
  if (auto m = FirstMismatch(
          T * h, [&](int64_t i) { return dx.Get(i); }, [&](int64_t i) { return fd[i]; }, 5e-3, 5e-3)) {
    ADD_FAILURE() << input << ": dx[" << m.index / h << ", " << m.index % h << "] = " << m.got
                  << " differs from the central difference of L (" << m.want << "); " << SeedNote();
  }
  Tensor& W = layer->router().weight().value;
  std::vector<double> fdw(W.numel());
  for (int64_t i = 0; i < W.numel(); ++i) {
    const float orig = W.Get(i);
    W.Set(i, orig + eps);
    const double lp = loss(x);
    ASSERT_TRUE(layer->routing().expert == routed.expert)
        << "a finite-difference step changed the choice; " << input << "; " << SeedNote();
    W.Set(i, orig - eps);
    const double lm = loss(x);
    W.Set(i, orig);
    fdw[i] = (lp - lm) / (2 * eps);
  }
  if (auto m = FirstMismatch(
          W.numel(), [&](int64_t i) { return dW.Get(i); }, [&](int64_t i) { return fdw[i]; }, 5e-3)) {
    ADD_FAILURE() << input << ": the router weight's gradient [" << m.index / h << ", " << m.index % h
                  << "] = " << m.got << " differs from the central difference of L (" << m.want << "); "
                  << SeedNote();
  }
}

// With dy = 0 the router's gradient is extra_dlogits alone: dW = extra^T x and dx = extra W. Drawn: h, f, E,
// k, the gate convention, T, x and extra.
TEST(MoeLayerHidden, ExtraDlogitsReachTheRouter) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(2, 6));
  LayerDraw d;
  const int k = static_cast<int>(rnd.Int(1, E));
  const bool normalized = rnd.Chance(0.5);
  d.config = DrawConfig(rnd, k, normalized, 3, 8, 4, 10, E, E);
  d.T = rnd.Int(2, 8);
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(d.config));
  const int64_t T = d.T, h = d.config.hidden;
  Tensor x = RandomTensor({T, h}, rnd.Next());
  Tensor dy({T, h});  // no task gradient: the router's gradient is extra^T x alone
  Tensor extra = RandomTensor({T, E}, rnd.Next());
  const std::string input =
      Str("MoeLayer {h = ", h, ", f = ", d.config.inner, ", E = ", E, ", k = ", d.config.top_k, "}, T = ", T,
          ", dy = 0, extra_dlogits drawn N(0, 1)");
  nn::ZeroGrads(layer->Parameters());
  ASSERT_OK(layer->Forward(x).status());
  ASSERT_OK_AND_ASSIGN(Tensor dx, layer->Backward(dy, &extra));
  ASSERT_EQ(dx.shape(), x.shape()) << input << "; " << SeedNote();
  const Tensor& dW = layer->router().weight().grad;
  const Tensor& W = layer->router().weight().value;
  auto want_dW = [&](int64_t i) {
    double want = 0;
    for (int64_t t = 0; t < T; ++t) want += extra.Get(t * E + i / h) * x.Get(t * h + i % h);
    return want;
  };
  if (auto m = FirstMismatch(
          E * h, [&](int64_t i) { return dW.Get(i); }, want_dW, 1e-5, 1e-5)) {
    ADD_FAILURE() << input << ": the router weight's gradient [" << m.index / h << ", " << m.index % h
                  << "] = " << m.got << ", not sum_t extra[t, e] x[t, c]; " << SeedNote();
  }
  auto want_dx = [&](int64_t i) {
    double want = 0;
    for (int64_t e = 0; e < E; ++e) want += extra.Get((i / h) * E + e) * W.Get(e * h + i % h);
    return want;
  };
  if (auto m = FirstMismatch(
          T * h, [&](int64_t i) { return dx.Get(i); }, want_dx, 1e-5, 1e-5)) {
    ADD_FAILURE() << input << ": dx[" << m.index / h << ", " << m.index % h << "] = " << m.got
                  << ", not sum_e extra[t, e] W[e, c]; " << SeedNote();
  }
}

// Every class of bad config is InvalidArgument: k > E, k < 1, h < 1, f < 1, E < 1.
TEST(MoeLayerHidden, CreateRejectsBadConfig) {
  CaseRandom rnd;
  MoeConfig base;
  base.hidden = rnd.Int(1, 8), base.inner = rnd.Int(1, 8), base.experts = static_cast<int>(rnd.Int(1, 8));
  base.top_k = static_cast<int>(rnd.Int(1, base.experts)), base.normalize_gates = rnd.Chance(0.5);
  base.seed = rnd.Next();
  auto show = [](const MoeConfig& c) {
    return Str("MoeLayer::Create({h = ", c.hidden, ", f = ", c.inner, ", E = ", c.experts, ", k = ", c.top_k,
               "})");
  };
  std::vector<std::pair<MoeConfig, std::string>> bad;
  MoeConfig c = base;
  c.top_k = c.experts + static_cast<int>(rnd.Int(1, 3));
  bad.push_back({c, "k > E"});
  c = base;
  c.top_k = -static_cast<int>(rnd.Int(0, 2));
  bad.push_back({c, "k < 1"});
  c = base;
  c.hidden = -rnd.Int(0, 3);
  bad.push_back({c, "h < 1"});
  c = base;
  c.inner = -rnd.Int(0, 3);
  bad.push_back({c, "f < 1"});
  c = base;
  c.experts = -static_cast<int>(rnd.Int(0, 2)), c.top_k = 1;
  bad.push_back({c, "E < 1"});
  for (const auto& [config, why] : bad) {
    EXPECT_EQ(MoeLayer::Create(config).status().code(), absl::StatusCode::kInvalidArgument)
        << show(config) << ": " << why << "; " << SeedNote();
  }
}

}  // namespace
}  // namespace distlab::moe
