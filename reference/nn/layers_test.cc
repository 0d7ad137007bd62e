// Gradient checks: every layer's explicit backward against central finite differences.
//
// For a module y = f(x; theta) the checked scalar is L = sum_i w_i y_i with a fixed random w, so dL/dy = w
// is what Backward receives; each analytic gradient entry must match (L(t + eps) - L(t - eps)) / (2 eps)
// within |num - ana| <= atol + rtol |ana| (forward runs in f32; the loss is summed in double).
#include "reference/nn/layers.h"

#include <cmath>
#include <functional>

#include "gtest/gtest.h"
#include "reference/nn/model.h"
#include "reference/nn/optim.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"

namespace distlab::nn {
namespace {

using tensor::FillNormal;

double Dot(const Tensor& w, const Tensor& y) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(w.Get(i)) * y.Get(i);
  return s;
}

// Compares `analytic` with central differences of `loss` in each entry of `t`.
void ExpectGradMatches(const std::function<double()>& loss, Tensor& t, const Tensor& analytic,
                       const std::string& what, float eps = 1e-2f, double rtol = 2e-2, double atol = 2e-3) {
  ASSERT_EQ(t.numel(), analytic.numel()) << what;
  int bad = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float keep = t.Get(i);
    t.Set(i, keep + eps);
    const double up = loss();
    t.Set(i, keep - eps);
    const double down = loss();
    t.Set(i, keep);
    const double num = (up - down) / (2.0 * eps);
    const double ana = analytic.Get(i);
    if (std::fabs(num - ana) > atol + rtol * std::fabs(ana) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << ana << " vs numeric " << num;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(GradCheck, Linear) {
  Linear lin("lin", 5, 3, /*bias=*/true, /*seed=*/1);
  FillNormal(lin.bias()->value, 9, 0.5f);
  Tensor x({4, 5}), w({4, 3});
  FillNormal(x, 2, 1.f);
  FillNormal(w, 3, 1.f);
  Tensor dx = lin.Backward((lin.Forward(x), w));
  auto loss = [&] { return Dot(w, lin.Forward(x)); };
  ExpectGradMatches(loss, lin.weight().value, lin.weight().grad, "dW");
  ExpectGradMatches(loss, lin.bias()->value, lin.bias()->grad, "db");
  ExpectGradMatches(loss, x, dx, "dx");
}

// The split backward (B = BackwardInput, W = BackwardWeight) with two microbatches in flight: the weight
// gradient of the first is taken after the second's forward has replaced the layer's cache.
TEST(GradCheck, LinearSplitBackward) {
  Linear lin("lin", 5, 3, /*bias=*/true, /*seed=*/1);
  FillNormal(lin.bias()->value, 9, 0.5f);
  Tensor x1({4, 5}), x2({4, 5}), w({4, 3});
  FillNormal(x1, 2, 1.f);
  FillNormal(x2, 12, 1.f);
  FillNormal(w, 3, 1.f);
  lin.Forward(x1);
  lin.Forward(x2);  // the cache now holds x2
  const Tensor dx = lin.BackwardInput(w);
  for (Parameter* p : lin.Parameters()) {
    for (int64_t i = 0; i < p->numel(); ++i)
      EXPECT_EQ(p->grad.Get(i), 0.f) << "B must not touch " << p->name();
  }
  lin.BackwardWeight(x1, w);
  auto loss = [&] { return Dot(w, lin.Forward(x1)); };
  ExpectGradMatches(loss, lin.weight().value, lin.weight().grad, "dW");
  ExpectGradMatches(loss, lin.bias()->value, lin.bias()->grad, "db");
  ExpectGradMatches(loss, x1, dx, "dx");
  // Split and fused agree exactly.
  Linear fused("lin", 5, 3, true, 1);
  fused.weight().value = lin.weight().value;
  fused.bias()->value = lin.bias()->value;
  fused.Forward(x1);
  const Tensor dx_fused = fused.Backward(w);
  for (int64_t i = 0; i < dx.numel(); ++i) EXPECT_EQ(dx.Get(i), dx_fused.Get(i)) << "dx[" << i << "]";
  ZeroGrads(lin.Parameters());
  lin.Forward(x2);
  lin.BackwardWeight(x1, w);
  for (int64_t i = 0; i < lin.weight().numel(); ++i) {
    EXPECT_EQ(lin.weight().grad.Get(i), fused.weight().grad.Get(i)) << "dW[" << i << "]";
  }
  for (int64_t i = 0; i < lin.bias()->numel(); ++i) {
    EXPECT_EQ(lin.bias()->grad.Get(i), fused.bias()->grad.Get(i)) << "db[" << i << "]";
  }
}

TEST(GradCheck, GeluBackwardAtAnExplicitInput) {
  Gelu gelu;
  Tensor x({3, 4}), other({3, 4}), w({3, 4});
  FillNormal(x, 4, 2.f);
  FillNormal(other, 14, 2.f);
  FillNormal(w, 5, 1.f);
  gelu.Forward(other);  // the cache is not what BackwardAt reads
  const Tensor dx = Gelu::BackwardAt(x, w);
  ExpectGradMatches([&] { return Dot(w, gelu.Forward(x)); }, x, dx, "dx", 1e-3f);
}

TEST(GradCheck, Gelu) {
  Gelu gelu;
  Tensor x({3, 4}), w({3, 4});
  FillNormal(x, 4, 2.f);
  FillNormal(w, 5, 1.f);
  gelu.Forward(x);
  Tensor dx = gelu.Backward(w);
  ExpectGradMatches([&] { return Dot(w, gelu.Forward(x)); }, x, dx, "dx", 1e-3f);
}

TEST(GradCheck, MlpBlock) {
  Mlp mlp("mlp", 4, 8, 7);
  Tensor x({3, 4}), w({3, 4});
  FillNormal(x, 6, 1.f);
  FillNormal(w, 8, 1.f);
  mlp.Forward(x);
  Tensor dx = mlp.Backward(w);
  auto loss = [&] { return Dot(w, mlp.Forward(x)); };
  for (Parameter* p : mlp.Parameters()) ExpectGradMatches(loss, p->value, p->grad, p->name(), 1e-3f);
  ExpectGradMatches(loss, x, dx, "dx", 1e-3f);
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  SoftmaxCrossEntropy ce;
  Tensor logits({4, 6});
  FillNormal(logits, 10, 2.f);
  const std::vector<int32_t> targets{0, 5, 2, 2};
  ce.Forward(logits, targets);
  Tensor d = ce.Backward(3.f);  // gradient of 3 * loss
  ExpectGradMatches([&] { return 3.0 * ce.Forward(logits, targets); }, logits, d, "dlogits", 1e-2f);
  // Uniform logits: loss = log V exactly.
  Tensor zeros({2, 6});
  EXPECT_NEAR(ce.Forward(zeros, {1, 3}), std::log(6.0), 1e-6);
  // Huge logits do not overflow (the max is subtracted before exp).
  Tensor big = Tensor::FromVector({1, 2}, {1000.f, 0.f});
  EXPECT_NEAR(ce.Forward(big, {1}), 1000.0, 1e-3);
}

TEST(GradCheck, TiedEmbeddingBecomesReadyAfterBothUses) {
  Embedding emb("embed", 7, 3, 11);
  int ready_calls = 0;
  emb.weight().on_grad_ready = [&](Parameter& p) {
    ++ready_calls;
    EXPECT_EQ(p.pending_uses(), 0);
  };
  const std::vector<int32_t> ids{1, 4, 4, 6};
  Tensor w({4, 7});
  FillNormal(w, 12, 1.f);
  Tensor h = emb.Forward(ids);
  emb.Project(h);
  EXPECT_EQ(emb.weight().pending_uses(), 2);
  Tensor dh = emb.ProjectBackward(w);
  EXPECT_EQ(ready_calls, 0) << "ready after the first of two uses";
  emb.Backward(dh);
  EXPECT_EQ(ready_calls, 1);
  emb.weight().on_grad_ready = nullptr;
  ExpectGradMatches([&] { return Dot(w, emb.Project(emb.Forward(ids))); }, emb.weight().value,
                    emb.weight().grad, "dE (both uses)");
}

TEST(GradCheck, TinyLMTiedAndUntied) {
  for (bool tie : {true, false}) {
    TinyLMConfig cfg{/*vocab=*/11, /*hidden=*/6, /*inner=*/12, /*layers=*/2, tie, /*seed=*/3};
    TinyLM model(cfg);
    const Batch batch = SyntheticBatch(cfg.vocab, 5, 0, 8);
    model.ZeroGrad();
    model.Forward(batch);
    model.Backward();
    for (Parameter* p : model.Parameters()) EXPECT_EQ(p->pending_uses(), 0) << p->name();
    for (Parameter* p : model.Parameters()) {
      ExpectGradMatches([&] { return model.Forward(batch); }, p->value, p->grad,
                        p->name() + (tie ? " (tied)" : " (untied)"), 1e-2f, 5e-2, 2e-3);
    }
  }
}

TEST(TinyLM, GradientsAccumulateAcrossBackwardPasses) {
  TinyLM model({11, 6, 12, 1, true, 3});
  const Batch batch = SyntheticBatch(11, 5, 0, 8);
  model.ZeroGrad();
  model.Forward(batch);
  model.Backward();
  const Tensor once = model.Parameters()[1]->grad;
  model.Forward(batch);
  model.Backward();
  Tensor twice = once;
  tensor::Scale(twice, 2.f);
  EXPECT_LT(tensor::MaxAbsDiff(model.Parameters()[1]->grad, twice), 1e-5f);
}

TEST(TinyLM, MemoryIsCountedByCategory) {
  tensor::MemoryTracker tracker;
  tensor::ScopedMemoryTracker scope(&tracker);
  TinyLMConfig cfg{16, 8, 32, 2, true, 1};
  TinyLM model(cfg);
  // Psi = V h + L (h f + f + f h + h).
  const int64_t psi = 16 * 8 + 2 * (8 * 32 + 32 + 32 * 8 + 8);
  EXPECT_EQ(CountParameters(model.Parameters()), psi);
  EXPECT_EQ(tracker.current(MemCategory::kParameters), 4u * psi);
  EXPECT_EQ(tracker.current(MemCategory::kGradients), 4u * psi);
  AdamW opt(model.Parameters(), {});
  EXPECT_EQ(tracker.current(MemCategory::kOptimizerState), 8u * psi);
  EXPECT_EQ(opt.StateBytes(), 8u * psi);
  model.Forward(SyntheticBatch(16, 1, 0, 10));
  EXPECT_GT(tracker.current(MemCategory::kActivations), 0u);
  model.ClearCache();
  EXPECT_EQ(tracker.current(MemCategory::kActivations), 0u);
  EXPECT_GT(tracker.peak(MemCategory::kActivations), 0u);
}

TEST(TinyLM, AdamWTrainsTheSyntheticTask) {
  TinyLMConfig cfg{16, 16, 64, 2, true, 1};
  TinyLM model(cfg);
  AdamWConfig acfg;
  acfg.lr = 1e-2f;
  AdamW opt(model.Parameters(), acfg);
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    model.ZeroGrad();
    const float loss = model.Forward(SyntheticBatch(cfg.vocab, 2, step, 32));
    model.Backward();
    opt.Step();
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_LT(last, 0.3f * first) << "first " << first << " last " << last;
}

TEST(LayersDeathTest, BadInputNamesTheProblem) {
  Linear lin("lin", 5, 3, true, 1);
  EXPECT_DEATH(lin.Forward(Tensor({2, 4})), "expects \\[N, 5\\], got \\[2, 4\\]");
  Embedding emb("embed", 4, 2, 1);
  EXPECT_DEATH(emb.Forward({0, 9}), "token id 9 at row 1 is outside the vocabulary \\[0, 4\\)");
  EXPECT_DEATH(lin.weight().GradAccumulated(), "without a matching forward use");
}

}  // namespace
}  // namespace distlab::nn
