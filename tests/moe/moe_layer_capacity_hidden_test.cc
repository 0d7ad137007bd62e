// Lab 6 stage C, hidden: expert capacity, dropping by probability and by position, dropped tokens passing
// through the residual.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/moe_layer.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testutil::MakeRouting;

// x = T * factor / E with a real fractional part rounds up (ceil, not floor or round).
TEST(ExpertCapacityHidden, RoundsARealFractionUp) {
  EXPECT_EQ(ExpertCapacity(10, 4, 1, 1.0).value(), 3) << "ceil(2.5) = 3: capacity rounds up, not down";
  EXPECT_EQ(ExpertCapacity(8, 4, 1, 1.0).value(), 2) << "an exact 2 stays 2";
  EXPECT_EQ(ExpertCapacity(8, 4, 1, 1.1).value(), 3) << "ceil(2.2) = 3: capacity rounds up, not down";
  EXPECT_EQ(ExpertCapacity(7, 4, 1, 1.5).value(), 3) << "ceil(2.625) = 3";
  EXPECT_EQ(ExpertCapacity(3, 8, 1, 1.0).value(), 1) << "ceil(0.375) = 1: fewer tokens than experts";
}

// x no more than 1e-9 * max(1, x) above an integer n gives n: the binary error of a factor like 1.1 (no
// double holds it exactly) must not add a slot. x is T * factor / E, multiplied first.
TEST(ExpertCapacityHidden, ForgivesTheBinaryErrorOfTheFactor) {
  EXPECT_EQ(ExpertCapacity(100, 10, 1, 1.1).value(), 11)
      << "100 * 1.1 / 10 = 11.000000000000002 must not round up to 12";
  EXPECT_EQ(ExpertCapacity(500, 10, 1, 1.1).value(), 55)
      << "500 * 1.1 / 10 = 55 (Megatron-LM's (500 / 10) * 1.1 = 55.00000000000001 gives 56)";
  EXPECT_EQ(ExpertCapacity(100, 2, 1, 1.1).value(), 55) << "100 * 1.1 / 2 = 55.00000000000001 -> 55";
  EXPECT_EQ(ExpertCapacity(1000, 10, 1, 1.1).value(), 110) << "1000 * 1.1 / 10 -> 110, not 111";
}

// The two formulas: kTokens (the default) C = ceil(T / E * factor); kAssignments C = ceil(k T / E * factor).
TEST(ExpertCapacityHidden, TokensByDefaultAssignmentsCountK) {
  constexpr auto kTok = CapacityFormula::kTokens;
  constexpr auto kAsg = CapacityFormula::kAssignments;
  EXPECT_EQ(ExpertCapacity(8, 4, 2, 1.25, kTok).value(), 3) << "ceil(8 / 4 * 1.25) = ceil(2.5)";
  EXPECT_EQ(ExpertCapacity(8, 4, 2, 1.25, kAsg).value(), 5) << "ceil(2 * 8 / 4 * 1.25) = 5";
  EXPECT_EQ(ExpertCapacity(4096, 8, 2, 1.25).value(), 640) << "default: 4096 / 8 * 1.25";
  EXPECT_EQ(ExpertCapacity(4096, 8, 2, 1.25, kAsg).value(), 1280);
  EXPECT_EQ(ExpertCapacity(10, 4, 3, 1.0, kAsg).value(), 8) << "ceil(30 / 4) = ceil(7.5)";
  EXPECT_EQ(ExpertCapacity(100, 10, 2, 1.1, kAsg).value(), 22)
      << "2 * 100 * 1.1 / 10 must not round up to 23";
  for (int64_t T : {1, 7, 10, 33}) {
    EXPECT_EQ(ExpertCapacity(T, 4, 1, 1.5, kTok).value(), ExpertCapacity(T, 4, 1, 1.5, kAsg).value())
        << "the formulas agree for k = 1, T = " << T;
  }
  EXPECT_EQ(ExpertCapacity(37, 4, 2, 0, kAsg).value(), 37) << "dropless either way";
}

// The layer uses the formula of its config: k = 2, E = 4, T = 8, factor 1, every token's first choice expert
// 0 (a router that only looks at the first feature, and a first feature that is large and positive): expert 0
// gets 8 assignments, so it keeps C of them -- 2 by default, 4 with kAssignments.
TEST(MoeLayerCapacityHidden, LayerUsesTheConfiguredFormula) {
  for (CapacityFormula formula : {CapacityFormula::kTokens, CapacityFormula::kAssignments}) {
    MoeConfig c;
    c.hidden = 3, c.inner = 4, c.experts = 4, c.top_k = 2, c.seed = 2;
    c.capacity_factor = 1.0, c.capacity_formula = formula, c.drop_policy = DropPolicy::kByPosition;
    ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(c));
    Tensor& W = layer->router().weight().value;  // [E, h]
    for (int64_t i = 0; i < W.numel(); ++i) W.Set(i, 0.f);
    W.Set(0 * 3 + 0, 3.f), W.Set(1 * 3 + 0, 1.f);  // expert 0 first, expert 1 second, for x[0] > 0
    Tensor x({8, 3});
    for (int64_t t = 0; t < 8; ++t) x.Set(t * 3, 1.f + t);
    ASSERT_OK(layer->Forward(x).status());
    const Routing& r = layer->routing();
    std::vector<int> kept(4, 0);
    for (int64_t s = 0; s < 16; ++s) {
      ASSERT_EQ(r.expert[s], s % 2 == 0 ? 0 : 1) << "slot " << s;
      if (r.kept[s]) kept[r.expert[s]]++;
    }
    const int want = formula == CapacityFormula::kTokens ? 2 : 4;
    EXPECT_EQ(kept[0], want) << (formula == CapacityFormula::kTokens ? "kTokens" : "kAssignments");
    EXPECT_EQ(kept[1], want);
  }
}

TEST(ExpertCapacityHidden, DroplessWithoutFactorAndErrors) {
  EXPECT_EQ(ExpertCapacity(37, 4, 2, 0).value(), 37);
  EXPECT_EQ(ExpertCapacity(37, 4, 2, -1).value(), 37);
  EXPECT_EQ(ExpertCapacity(8, 0, 1, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpertCapacity(8, 4, 5, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpertCapacity(-1, 4, 1, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
}

// E = 2, k = 1, T = 5: every token chose expert 0 except token 3.
//   p(expert 0) by token: .6 .9 .7 (token 3 -> expert 1) .8
//   capacity 2, by probability: expert 0 keeps tokens 1 (.9) and 4 (.8); by position: tokens 0 and 1.
Routing FiveTokens() {
  return MakeRouting(5, 2, 1, {.6f, .4f, .9f, .1f, .7f, .3f, .2f, .8f, .8f, .2f}, {0, 0, 0, 1, 0});
}

TEST(ApplyCapacityHidden, DropsLowestProbabilityFirst) {
  Routing r = FiveTokens();
  const std::vector<float> gates = r.gate;
  ASSERT_OK(ApplyCapacity(r, 2, DropPolicy::kByProbability));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(r.gate, gates) << "gates stay as they are";
}

TEST(ApplyCapacityHidden, DropsLatestPositionFirst) {
  Routing r = FiveTokens();
  ASSERT_OK(ApplyCapacity(r, 2, DropPolicy::kByPosition));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{1, 1, 0, 1, 0}));
}

// Equal probabilities keep the earlier token: E = 2, k = 1, T = 4 on expert 0 with p = .7 .5 .5 .5,
// capacity 2 by probability keeps tokens 0 (.7) and 1 (the earliest of the three .5s).
TEST(ApplyCapacityHidden, EqualProbabilitiesKeepTheEarlierToken) {
  Routing r = MakeRouting(4, 2, 1, {.7f, .3f, .5f, .5f, .5f, .5f, .5f, .5f}, {0, 0, 0, 0});
  ASSERT_OK(ApplyCapacity(r, 2, DropPolicy::kByProbability));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{1, 1, 0, 0}));
}

TEST(ApplyCapacityHidden, TopTwoSlotsAndZeroCapacity) {
  // k = 2, E = 3, T = 4, choices {0,1} {1,0} {0,1} {2,0}; capacity 2 by position:
  //   expert 0: tokens 0 1 2 3 -> keeps 0, 1;  expert 1: tokens 0 1 2 -> keeps 0, 1;  expert 2: token 3 ->
  //   keeps kept (t, j):  t0 [1 1]  t1 [1 1]  t2 [0 0]  t3 [1 0]
  Routing r = MakeRouting(4, 3, 2, {.5f, .3f, .2f, .3f, .5f, .2f, .5f, .3f, .2f, .3f, .2f, .5f},
                          {0, 1, 1, 0, 0, 1, 2, 0});
  ASSERT_OK(ApplyCapacity(r, 2, DropPolicy::kByPosition));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{1, 1, 1, 1, 0, 0, 1, 0}));
  ASSERT_OK(ApplyCapacity(r, 0, DropPolicy::kByPosition));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>(8, 0)));
  EXPECT_EQ(ApplyCapacity(r, -1, DropPolicy::kByPosition).code(), absl::StatusCode::kInvalidArgument);
}

// A layer with a tight capacity: a token whose only slot was dropped leaves unchanged (y = x, exactly), the
// kept ones match the dense reference on the kept slots only.
TEST(MoeLayerCapacityHidden, DroppedTokensPassThroughTheResidual) {
  MoeConfig c;
  c.hidden = 4, c.inner = 8, c.experts = 2, c.top_k = 1, c.normalize_gates = false, c.seed = 3;
  c.capacity_factor = 0.5;  // C = ceil(8 / 2 * 0.5) = 2 of the 8 tokens per expert
  c.drop_policy = DropPolicy::kByPosition;
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(c));
  tensor::FillNormal(layer->router().weight().value, 5, 1.0f);
  nn::ZeroGrads(layer->Parameters());
  const int64_t T = 8, h = 4;
  Tensor x = testutil::RandomTensor({T, h}, 6);
  ASSERT_OK_AND_ASSIGN(Tensor y, layer->Forward(x));
  const Routing& r = layer->routing();
  int dropped = 0;
  std::vector<int> seen(2, 0);
  for (int64_t t = 0; t < T; ++t) {
    const int e = r.expert[t];
    const bool keep = seen[e]++ < 2;  // by position: the first two tokens of each expert
    ASSERT_EQ(r.kept[t], keep ? 1 : 0) << "token " << t;
    std::vector<double> want = testutil::Row(x, t);
    if (keep) {
      std::vector<double> o = testutil::ExpertRef(*layer, e, want);
      for (int64_t cc = 0; cc < h; ++cc) want[cc] += r.probs[t * 2 + e] * o[cc];
    } else {
      ++dropped;
    }
    for (int64_t cc = 0; cc < h; ++cc) {
      EXPECT_NEAR(y.Get(t * h + cc), want[cc], 2e-5) << (keep ? "kept" : "dropped") << " token " << t;
    }
  }
  EXPECT_GE(dropped, 4);
  // Backward: a dropped token's gradient is the residual's alone, dx = dy (no expert, no gate).
  Tensor dy = testutil::RandomTensor({T, h}, 7);
  ASSERT_OK_AND_ASSIGN(Tensor dx, layer->Backward(dy));
  for (int64_t t = 0; t < T; ++t) {
    if (r.kept[t]) continue;
    for (int64_t cc = 0; cc < h; ++cc)
      EXPECT_FLOAT_EQ(dx.Get(t * h + cc), dy.Get(t * h + cc)) << "token " << t;
  }
}

}  // namespace
}  // namespace distlab::moe
