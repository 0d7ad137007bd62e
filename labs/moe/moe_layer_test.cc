// Lab 6 stage A, public tests: the router by hand and the layer's residual.
#include "labs/moe/moe_layer.h"

#include <cmath>

#include "gtest/gtest.h"
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
