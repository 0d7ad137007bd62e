// Lab 6 stage A, public tests: the router and its backward by hand, and a hand-set layer forward and
// backward.
#include "labs/moe/moe_layer.h"

#include <cmath>

#include "gtest/gtest.h"
#include "reference/nn/parameter.h"
#include "reference/tensor/random.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

TEST(Route, TopTwoByHand) {
  // logits = log([1 2 4 1]): probs = [1 2 4 1] / 8
  //
  //   expert   0     1     2     3
  //   p      .125  .25   .5    .125
  //   top-2          #2    #1          -> expert = [2, 1], gate = [.5, .25] / .75 = [2/3, 1/3]
  Tensor z = Tensor::FromVector({1, 4}, {0.f, std::log(2.f), std::log(4.f), 0.f});
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, 2, /*normalize_gates=*/true));
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(r.probs[2], 0.5, 1e-6);
  EXPECT_NEAR(r.gate[0], 2.0 / 3, 1e-6);
  EXPECT_NEAR(r.gate[1], 1.0 / 3, 1e-6);
}

TEST(Route, TiesGoToTheLowerExpertIndex) {
  // logits [0 0 0 0]: four equal probabilities .25; top-2 takes experts 0 and 1 (lower index first), and
  // logits [1 0 0 1]: experts 0 and 3 tie for first -> [0, 3].
  Tensor z = Tensor::FromVector({2, 4}, {0.f, 0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 1.f});
  ASSERT_OK_AND_ASSIGN(Routing r, Route(z, 2, /*normalize_gates=*/true));
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 1, 0, 3}));
}

// One token's routing as Route would give it, built by hand so that RouterBackward is tested on its own.
Routing OneToken(std::vector<float> probs, std::vector<int32_t> expert, std::vector<float> gate,
                 bool normalized) {
  Routing r;
  r.tokens = 1, r.experts = static_cast<int>(probs.size()), r.top_k = static_cast<int>(expert.size());
  r.normalized = normalized;
  r.probs = std::move(probs), r.expert = std::move(expert), r.gate = std::move(gate);
  r.kept.assign(r.top_k, 1);
  return r;
}

TEST(RouterBackward, TopOneOnTwoExpertsByHand) {
  // E = 2, k = 1, one token with p = [.75 .25] (logits [ln 3, 0]), expert 0. dL/dgate = 1.
  //
  //                      gate   dlogits
  //   raw gates          .75    [ .1875  -.1875]
  //   renormalised       1      [ 0       0    ]   (top-1 renormalised: the gate is 1 whatever the logits)
  for (bool normalized : {false, true}) {
    Routing r = OneToken({.75f, .25f}, {0}, {normalized ? 1.f : .75f}, normalized);
    ASSERT_OK_AND_ASSIGN(Tensor dz, RouterBackward(r, {1.f}));
    ASSERT_EQ(dz.shape(), (tensor::Shape{1, 2}));
    const float want = normalized ? 0.f : 0.1875f;
    EXPECT_NEAR(dz.Get(0), want, 1e-6) << (normalized ? "renormalised" : "raw") << " gates, dlogits[0, 0]";
    EXPECT_NEAR(dz.Get(1), -want, 1e-6) << (normalized ? "renormalised" : "raw") << " gates, dlogits[0, 1]";
  }
}

TEST(RouterBackward, TopTwoOfFourByHand) {
  // The routing of Route.TopTwoByHand: p = [1 2 4 1] / 8, experts [2, 1], gates [2/3, 1/3]; dL/dgate = [1, 0]
  // (the loss reads the first gate only).
  //
  //   expert          0      1      2      3
  //   p             .125   .25    .5     .125
  //   renormalised   0    -2/9    2/9    0       the first gate rises with expert 2's logit and falls with
  //                                              expert 1's; the unchosen experts do not move it
  //   raw gates    -1/16  -1/8    1/4   -1/16    the first gate would be p_2 itself
  const std::vector<std::vector<float>> want = {{-1 / 16.f, -1 / 8.f, 1 / 4.f, -1 / 16.f},
                                                {0.f, -2 / 9.f, 2 / 9.f, 0.f}};
  for (bool normalized : {false, true}) {
    const std::vector<float> gate =
        normalized ? std::vector<float>{2 / 3.f, 1 / 3.f} : std::vector<float>{.5f, .25f};
    Routing r = OneToken({.125f, .25f, .5f, .125f}, {2, 1}, gate, normalized);
    ASSERT_OK_AND_ASSIGN(Tensor dz, RouterBackward(r, {1.f, 0.f}));
    ASSERT_EQ(dz.shape(), (tensor::Shape{1, 4}));
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(dz.Get(i), want[normalized][i], 1e-6)
          << (normalized ? "renormalised" : "raw") << " gates, dlogits[0, " << i << "]";
    }
  }
}

// A layer set by hand: h = 2, f = 1, E = 2, k = 1, raw gates; the router's weight is the identity (logits =
// x), and each expert is constant (fc2's weight 0, its bias c_e): Expert_0(x) = [2 0], Expert_1(x) = [0 4].
//
//   token  x           p          expert   gate   y
//   0      [ln 3, 0]   [.75 .25]  0        .75    [ln 3 + 1.5, 0]  = [2.5986 0]
//   1      [0, ln 3]   [.25 .75]  1        .75    [0, ln 3 + 3]    = [0 4.0986]
//   2      [0, 0]      [.5  .5 ]  0 (tie)  .5     [1, 0]
//
// Backward of L = sum of y (dy = 1 everywhere):
//   token  dL/dgate   dlogits         dx
//   0      2          [ .375 -.375]   [1.375  .625]
//   1      4          [-.75   .75 ]   [ .25  1.75 ]
//   2      2          [ .5   -.5  ]   [1.5    .5  ]
//   expert 0's fc2 bias gradient [1.25 1.25] (tokens 0 and 2), expert 1's [.75 .75] (token 1);
//   the router's weight gradient [[.375 ln 3, -.75 ln 3], [-.375 ln 3, .75 ln 3]].
TEST(MoeLayer, ForwardAndBackwardByHand) {
  MoeConfig c;
  c.hidden = 2, c.inner = 1, c.experts = 2, c.top_k = 1, c.normalize_gates = false;
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(c));
  Tensor& W = layer->router().weight().value;  // [E, h]
  for (int64_t i = 0; i < 4; ++i) W.Set(i, i == 0 || i == 3 ? 1.f : 0.f);
  const std::vector<std::vector<float>> out = {{2, 0}, {0, 4}};
  for (int e = 0; e < 2; ++e) {
    nn::Linear& fc2 = layer->expert(e).fc2();
    for (int64_t i = 0; i < fc2.weight().value.numel(); ++i) fc2.weight().value.Set(i, 0.f);
    ASSERT_NE(fc2.bias(), nullptr);
    for (int64_t i = 0; i < 2; ++i) fc2.bias()->value.Set(i, out[e][i]);
  }
  const float l3 = std::log(3.f);
  Tensor x = Tensor::FromVector({3, 2}, {l3, 0.f, 0.f, l3, 0.f, 0.f});
  nn::ZeroGrads(layer->Parameters());
  ASSERT_OK_AND_ASSIGN(Tensor y, layer->Forward(x));
  EXPECT_EQ(layer->routing().expert, (std::vector<int32_t>{0, 1, 0}));
  const std::vector<float> want_y = {l3 + 1.5f, 0.f, 0.f, l3 + 3.f, 1.f, 0.f};
  ASSERT_EQ(y.shape(), x.shape());
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y.Get(i), want_y[i], 1e-5) << "y[" << i / 2 << ", " << i % 2 << "]";

  Tensor dy = Tensor::FromVector({3, 2}, {1, 1, 1, 1, 1, 1});
  ASSERT_OK_AND_ASSIGN(Tensor dx, layer->Backward(dy));
  const std::vector<float> want_dx = {1.375f, .625f, .25f, 1.75f, 1.5f, .5f};
  ASSERT_EQ(dx.shape(), x.shape());
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(dx.Get(i), want_dx[i], 1e-5) << "dx[" << i / 2 << ", " << i % 2 << "]";
  const std::vector<float> want_db = {1.25f, .75f};
  for (int e = 0; e < 2; ++e) {
    const Tensor& db = layer->expert(e).fc2().bias()->grad;
    for (int64_t i = 0; i < 2; ++i)
      EXPECT_NEAR(db.Get(i), want_db[e], 1e-6) << "expert " << e << " fc2 bias grad";
  }
  const Tensor& dW = layer->router().weight().grad;
  const std::vector<float> want_dW = {.375f * l3, -.75f * l3, -.375f * l3, .75f * l3};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(dW.Get(i), want_dW[i], 1e-5) << "router weight grad [" << i << "]";
}

TEST(MoeLayer, OutputKeepsTheResidualShape) {
  MoeConfig c;
  c.hidden = 4, c.inner = 8, c.experts = 4, c.top_k = 2;
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(c));
  Tensor x({3, 4});
  tensor::FillNormal(x, 1, 1.f);
  ASSERT_OK_AND_ASSIGN(Tensor y, layer->Forward(x));
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(layer->routing().tokens, 3);
  EXPECT_EQ(layer->Parameters().size(), 1u + 4 * 4) << "router weight, then fc1 W b, fc2 W b per expert";
}

}  // namespace
}  // namespace distlab::moe
