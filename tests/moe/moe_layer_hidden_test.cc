// Lab 6 stage A, hidden: routing (softmax, top-k, gates), its backward, the layer against a dense
// per-token loop, and the layer's gradients against finite differences.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/moe_layer.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testutil::RandomTensor;

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

TEST(RouteHidden, UnnormalizedGatesAreProbabilities) {
  ASSERT_OK_AND_ASSIGN(Routing r, Route(LogitsOf({{1, 2, 4, 1}}), 2, false));
  EXPECT_FALSE(r.normalized);
  EXPECT_NEAR(r.gate[0], 0.5, 1e-6);
  EXPECT_NEAR(r.gate[1], 0.25, 1e-6);
  ASSERT_OK_AND_ASSIGN(Routing one, Route(LogitsOf({{1, 2, 4, 1}}), 1, true));
  EXPECT_EQ(one.expert[0], 2);
  EXPECT_NEAR(one.gate[0], 1.0, 1e-6);  // top-1 renormalised: always 1
}

TEST(RouteHidden, LargeLogitsStayFinite) {
  Tensor z = Tensor::FromVector({1, 3}, {1000.f, 999.f, -1000.f});
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, 1, false));
  EXPECT_NEAR(r.probs[0], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(r.expert[0], 0);
}

TEST(RouteHidden, RejectsBadArguments) {
  Tensor z({3, 4});
  EXPECT_EQ(Route(z, 0, true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Route(z, 5, true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Route(Tensor({12}), 1, true).status().code(), absl::StatusCode::kInvalidArgument);
}

// L(z) = sum_{t,j} w[t,j] * gate[t,j](z) with the choice frozen; RouterBackward(w) must be dL/dz.
void CheckRouterBackward(bool normalized) {
  const int64_t T = 3;
  const int E = 5, k = 2;
  Tensor z = RandomTensor({T, E}, 11);
  std::vector<float> w = {0.3f, -1.2f, 0.7f, 0.5f, -0.4f, 1.1f};
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, k, normalized));
  ASSERT_OK_AND_ASSIGN(Tensor dz, RouterBackward(r, w));
  ASSERT_EQ(dz.shape(), (tensor::Shape{T, E}));
  auto L = [&](const Tensor& zz) {
    Routing rr = Route(zz, k, normalized).value();
    EXPECT_EQ(rr.expert, r.expert) << "finite difference changed the choice";
    double s = 0;
    for (int i = 0; i < T * k; ++i) s += w[i] * rr.gate[i];
    return s;
  };
  const float eps = 1e-3f;
  for (int64_t i = 0; i < T * E; ++i) {
    Tensor zp = z, zm = z;
    zp.Set(i, z.Get(i) + eps);
    zm.Set(i, z.Get(i) - eps);
    const double fd = (L(zp) - L(zm)) / (2 * eps);
    EXPECT_NEAR(dz.Get(i), fd, 2e-3) << "dlogits[" << i / E << ", " << i % E << "]";
  }
}

TEST(RouterBackwardHidden, NormalizedMatchesFiniteDifferences) { CheckRouterBackward(true); }
TEST(RouterBackwardHidden, UnnormalizedMatchesFiniteDifferences) { CheckRouterBackward(false); }

MoeConfig SmallConfig(int k, bool normalized) {
  MoeConfig c;
  c.hidden = 6, c.inner = 10, c.experts = 4, c.top_k = k, c.normalize_gates = normalized, c.seed = 5;
  return c;
}

// The dense reference: every token on its own, in double.
void CheckAgainstDenseLoop(int k, bool normalized) {
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(SmallConfig(k, normalized)));
  // Larger router weights so the routing is far from uniform and tokens spread over experts.
  tensor::FillNormal(layer->router().weight().value, 99, 1.0f);
  const int64_t T = 9, h = 6, E = 4;
  Tensor x = RandomTensor({T, h}, 3);
  ASSERT_OK_AND_ASSIGN(Tensor y, layer->Forward(x));
  ASSERT_EQ(y.shape(), x.shape());
  std::vector<int> used(E, 0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> xt = testutil::Row(x, t);
    std::vector<double> z = testutil::LinearRef(layer->router().weight().value, nullptr, xt);
    double zmax = *std::max_element(z.begin(), z.end()), s = 0;
    for (double& v : z) s += (v = std::exp(v - zmax));
    for (double& v : z) v /= s;
    std::vector<int> order = {0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += z[order[j]];
    std::vector<double> yt = xt;
    for (int j = 0; j < k; ++j) {
      const double g = normalized ? z[order[j]] / chosen : z[order[j]];
      std::vector<double> o = testutil::ExpertRef(*layer, order[j], xt);
      for (int64_t c = 0; c < h; ++c) yt[c] += g * o[c];
      used[order[j]] = 1;
    }
    for (int64_t c = 0; c < h; ++c)
      EXPECT_NEAR(y.Get(t * h + c), yt[c], 2e-5) << "y[" << t << ", " << c << "]";
  }
  EXPECT_GE(std::count(used.begin(), used.end(), 1), 2) << "the case should exercise several experts";
}

TEST(MoeLayerHidden, TopOneMatchesDenseTokenLoop) { CheckAgainstDenseLoop(1, false); }
TEST(MoeLayerHidden, TopTwoNormalizedMatchesDenseTokenLoop) { CheckAgainstDenseLoop(2, true); }

// L = sum w * y. Checks dx and the router's gradient against central differences.
TEST(MoeLayerHidden, GradientsMatchFiniteDifferences) {
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(SmallConfig(2, true)));
  tensor::FillNormal(layer->router().weight().value, 77, 1.0f);
  const int64_t T = 5, h = 6;
  Tensor x = RandomTensor({T, h}, 4);
  Tensor w = RandomTensor({T, h}, 8);
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
  Tensor dW = layer->router().weight().grad;
  const float eps = 2e-3f;
  for (int64_t i = 0; i < T * h; ++i) {
    Tensor xp = x, xm = x;
    xp.Set(i, x.Get(i) + eps);
    xm.Set(i, x.Get(i) - eps);
    const double fd = (loss(xp) - loss(xm)) / (2 * eps);
    EXPECT_NEAR(dx.Get(i), fd, 5e-3 * std::max(1.0, std::fabs(fd))) << "dx[" << i << "]";
  }
  Tensor& W = layer->router().weight().value;
  for (int64_t i = 0; i < W.numel(); ++i) {
    const float orig = W.Get(i);
    W.Set(i, orig + eps);
    const double lp = loss(x);
    EXPECT_EQ(layer->routing().expert, routed.expert) << "finite difference changed the choice";
    W.Set(i, orig - eps);
    const double lm = loss(x);
    W.Set(i, orig);
    EXPECT_NEAR(dW.Get(i), (lp - lm) / (2 * eps), 5e-3) << "d router W[" << i << "]";
  }
}

TEST(MoeLayerHidden, ExtraDlogitsReachTheRouter) {
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(SmallConfig(1, false)));
  const int64_t T = 4, h = 6, E = 4;
  Tensor x = RandomTensor({T, h}, 21);
  Tensor dy({T, h});  // no task gradient: the router's gradient is extra^T x alone
  Tensor extra = RandomTensor({T, E}, 22);
  nn::ZeroGrads(layer->Parameters());
  ASSERT_OK(layer->Forward(x).status());
  ASSERT_OK_AND_ASSIGN(Tensor dx, layer->Backward(dy, &extra));
  const Tensor& dW = layer->router().weight().grad;
  const Tensor& W = layer->router().weight().value;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t c = 0; c < h; ++c) {
      double want = 0;
      for (int64_t t = 0; t < T; ++t) want += extra.Get(t * E + e) * x.Get(t * h + c);
      EXPECT_NEAR(dW.Get(e * h + c), want, 1e-5);
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < h; ++c) {
      double want = 0;
      for (int64_t e = 0; e < E; ++e) want += extra.Get(t * E + e) * W.Get(e * h + c);
      EXPECT_NEAR(dx.Get(t * h + c), want, 1e-5);
    }
  }
}

TEST(MoeLayerHidden, CreateRejectsBadConfig) {
  MoeConfig c = SmallConfig(2, true);
  c.top_k = 5;
  EXPECT_EQ(MoeLayer::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = SmallConfig(2, true);
  c.hidden = 0;
  EXPECT_EQ(MoeLayer::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::moe
