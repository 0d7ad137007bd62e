// The GPT pieces against central finite differences, the causal mask, micro-batches in flight, the cache
// formula, the parameter count and a training run whose loss falls.
//
// Checked scalar as in layers_test.cc: L = sum_i w_i y_i with a fixed random w (so dL/dy = w), each analytic
// gradient entry within atol + rtol |ana| of (L(t + eps) - L(t - eps)) / (2 eps), L summed in double.
#include "reference/nn/transformer.h"

#include <cmath>
#include <cstdio>
#include <functional>

#include "gtest/gtest.h"
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

// Compares `analytic` with central differences of `loss` in every `stride`-th entry of `t`.
void ExpectGradMatches(const std::function<double()>& loss, Tensor& t, const Tensor& analytic,
                       const std::string& what, int64_t stride = 1, float eps = 1e-2f, double rtol = 2e-2,
                       double atol = 2e-3) {
  ASSERT_EQ(t.numel(), analytic.numel()) << what;
  int bad = 0;
  for (int64_t i = 0; i < t.numel(); i += stride) {
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

GptConfig Small() {
  GptConfig c;
  c.vocab = 11;
  c.hidden = 8;
  c.heads = 2;
  c.inner = 32;
  c.seq = 4;
  c.layers = 2;
  c.seed = 5;
  return c;
}

TEST(GradCheck, LayerNorm) {
  LayerNorm ln("ln", 6, 1e-5f);
  FillNormal(ln.gamma().value, 3, 1.f);
  FillNormal(ln.beta().value, 4, 1.f);
  Tensor x({5, 6}), w({5, 6});
  FillNormal(x, 1, 2.f);
  FillNormal(w, 2, 1.f);
  LayerNorm::Cache cache;
  ln.Forward(x, &cache);
  EXPECT_EQ(cache.bytes(), 4u * (5 * 6 + 5));
  const Tensor dx = ln.Backward(w, &cache);
  EXPECT_FALSE(cache.xhat.allocated()) << "Backward releases the cache";
  auto loss = [&] { return Dot(w, ln.Forward(x, nullptr)); };
  ExpectGradMatches(loss, ln.gamma().value, ln.gamma().grad, "dgamma");
  ExpectGradMatches(loss, ln.beta().value, ln.beta().grad, "dbeta");
  ExpectGradMatches(loss, x, dx, "dx", 1, 1e-3f);
}

TEST(GradCheck, AttentionCore) {
  const int64_t heads = 2, seq = 4, n = 8, width = 6;
  Tensor q({n, width}), k({n, width}), v({n, width}), w({n, width});
  FillNormal(q, 1, 1.f);
  FillNormal(k, 2, 1.f);
  FillNormal(v, 3, 1.f);
  FillNormal(w, 4, 1.f);
  Tensor probs;
  CausalAttention(q, k, v, heads, seq, &probs);
  ASSERT_EQ(probs.shape(), (tensor::Shape{2, heads, seq, seq}));
  Tensor dq, dk, dv;
  CausalAttentionBackward(q, k, v, probs, w, heads, seq, &dq, &dk, &dv);
  auto loss = [&] { return Dot(w, CausalAttention(q, k, v, heads, seq, nullptr)); };
  ExpectGradMatches(loss, q, dq, "dq", 1, 1e-3f);
  ExpectGradMatches(loss, k, dk, "dk", 1, 1e-3f);
  ExpectGradMatches(loss, v, dv, "dv", 1, 1e-3f);
  // Every row of P sums to 1 over the visible keys and is 0 above the diagonal.
  for (int64_t b = 0; b < 2 * heads; ++b) {
    for (int64_t i = 0; i < seq; ++i) {
      double sum = 0;
      for (int64_t t = 0; t < seq; ++t) {
        const float p = probs.Get((b * seq + i) * seq + t);
        if (t > i) EXPECT_EQ(p, 0.f) << "P[" << i << "][" << t << "] sees the future";
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(GradCheck, GptBlock) {
  const GptConfig cfg = Small();
  GptBlock block("blocks.0", cfg);
  // Non-trivial norms and biases, so that every gradient path is exercised.
  int seed = 20;
  for (Parameter* p : block.Parameters()) {
    if (p->value.ndim() == 1) FillNormal(p->value, seed++, 0.3f);
  }
  tensor::Fill(block.ln1().gamma().value, 1.2f);
  Tensor x({8, cfg.hidden}), w({8, cfg.hidden});
  FillNormal(x, 1, 1.f);
  FillNormal(w, 2, 1.f);
  BlockCache cache;
  block.Forward(x, &cache);
  const Tensor dx = block.Backward(w, &cache);
  EXPECT_EQ(cache.bytes(), 0u) << "Backward releases the cache";
  auto loss = [&] { return Dot(w, block.Forward(x, nullptr)); };
  const std::vector<std::string> names = block.ParameterNames();
  const std::vector<Parameter*> params = block.Parameters();
  ASSERT_EQ(names.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i]->name(), names[i]);
    ExpectGradMatches(loss, params[i]->value, params[i]->grad, names[i], 1, 1e-2f, 3e-2, 3e-3);
  }
  ExpectGradMatches(loss, x, dx, "dx", 1, 1e-2f, 3e-2, 3e-3);
}

TEST(GradCheck, GptEndToEnd) {
  for (bool tie : {false, true}) {
    GptConfig cfg = Small();
    cfg.tie_embeddings = tie;
    Gpt model(cfg);
    const Batch batch = SyntheticSequences(cfg.vocab, cfg.seq, 3, 0, 2);
    model.ZeroGrad();
    model.Forward(batch);
    model.Backward();
    for (Parameter* p : model.Parameters()) EXPECT_EQ(p->pending_uses(), 0) << p->name();
    for (Parameter* p : model.Parameters()) {
      // About 16 sampled entries per tensor keep the check fast.
      const int64_t stride = std::max<int64_t>(1, p->numel() / 16);
      ExpectGradMatches([&] { return model.Forward(batch); }, p->value, p->grad,
                        p->name() + (tie ? " (tied)" : " (untied)"), stride, 1e-2f, 5e-2, 2e-3);
    }
  }
}

// Changing the tokens after position j leaves every output at positions <= j bitwise equal.
TEST(Attention, CausalMaskHidesTheFuture) {
  const GptConfig cfg = Small();
  GptEmbedding emb(cfg);
  GptBlock block("blocks.0", cfg);
  std::vector<int32_t> ids{1, 2, 3, 4, 5, 6, 7, 8};
  const Tensor y1 = block.Forward(emb.Forward(ids), nullptr);
  ids[2] = 9;  // sequence 0, position 2
  ids[7] = 0;  // sequence 1, position 3
  const Tensor y2 = block.Forward(emb.Forward(ids), nullptr);
  for (int64_t r = 0; r < 8; ++r) {
    const bool unchanged = (r / 4 == 0 && r % 4 < 2) || (r / 4 == 1 && r % 4 < 3);
    bool equal = true;
    for (int64_t c = 0; c < cfg.hidden; ++c)
      equal &= y1.Get(r * cfg.hidden + c) == y2.Get(r * cfg.hidden + c);
    if (unchanged) EXPECT_TRUE(equal) << "row " << r << " saw a later token";
    if (!unchanged) EXPECT_FALSE(equal) << "row " << r << " ignored its own or an earlier token";
  }
}

// F0 F1 B0 B1 with two caches gives exactly the gradients of F0 B0 F1 B1.
TEST(GptBlockTest, MicroBatchesInFlight) {
  const GptConfig cfg = Small();
  GptBlock a("blocks.0", cfg), b("blocks.0", cfg);
  Tensor x0({4, cfg.hidden}), x1({8, cfg.hidden}), w0({4, cfg.hidden}), w1({8, cfg.hidden});
  FillNormal(x0, 1, 1.f);
  FillNormal(x1, 2, 1.f);
  FillNormal(w0, 3, 1.f);
  FillNormal(w1, 4, 1.f);
  BlockCache c0, c1;
  a.Forward(x0, &c0);
  a.Forward(x1, &c1);
  const Tensor dx0 = a.Backward(w0, &c0);
  const Tensor dx1 = a.Backward(w1, &c1);
  BlockCache c;
  b.Forward(x0, &c);
  const Tensor ex0 = b.Backward(w0, &c);
  b.Forward(x1, &c);
  const Tensor ex1 = b.Backward(w1, &c);
  EXPECT_EQ(tensor::MaxAbsDiff(dx0, ex0), 0.f);
  EXPECT_EQ(tensor::MaxAbsDiff(dx1, ex1), 0.f);
  const auto pa = a.Parameters(), pb = b.Parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(tensor::MaxAbsDiff(pa[i]->grad, pb[i]->grad), 0.f) << pa[i]->name();
}

TEST(GptBlockTest, CacheBytesFormula) {
  const GptConfig cfg;  // h 32, a 8, f 128, s 8
  GptBlock block("blocks.0", cfg);
  tensor::MemoryTracker tracker;
  tensor::ScopedMemoryTracker scope(&tracker);
  Tensor x({16, cfg.hidden});
  const size_t before = tracker.current(tensor::MemCategory::kActivations);
  BlockCache cache;
  block.Forward(x, &cache);
  // 4 N [(4h + 2) + (4h + 2f + a s)] = 4 * 16 * (130 + 448) = 36,992 bytes (2,312 per token).
  EXPECT_EQ(BlockCacheBytes(cfg, 16), 36992u);
  EXPECT_EQ(cache.bytes(), BlockCacheBytes(cfg, 16));
  Tensor y = block.Forward(x, nullptr);  // evaluation keeps nothing beyond its output
  EXPECT_EQ(tracker.current(tensor::MemCategory::kActivations) - before, cache.bytes() + y.bytes());
  EXPECT_EQ(BlockCacheBytes(cfg, 16, 4), static_cast<size_t>(4 * 16 * (130 + 448 / 4)));
}

TEST(GptTest, ParameterCountFormula) {
  GptConfig cfg;
  EXPECT_EQ(BlockParameters(cfg), 12704);
  EXPECT_EQ(GptParameters(cfg), 53184);
  Gpt model(cfg);
  EXPECT_EQ(CountParameters(model.Parameters()), 53184);
  cfg.tie_embeddings = true;
  Gpt tied(cfg);
  EXPECT_EQ(CountParameters(tied.Parameters()), GptParameters(cfg));
  EXPECT_EQ(GptParameters(cfg), 53184 - 32 * 32);
  EXPECT_EQ(BlockParameters(cfg, 2), 6 * 32 + (4 * 32 * 32 + 3 * 32 + 2 * 32 * 128 + 128) / 2);
}

TEST(GptTest, SyntheticSequencesFollowTheRecurrence) {
  const Batch b = SyntheticSequences(32, 8, 7, 3, 4);
  ASSERT_EQ(b.ids.size(), 32u);
  for (int i = 0; i < 4; ++i) {
    const int32_t* x = &b.ids[i * 8];
    const int32_t* t = &b.targets[i * 8];
    EXPECT_EQ(x[1], (3 * x[0] + 1) % 32);
    for (int j = 0; j < 7; ++j) EXPECT_EQ(t[j], x[j + 1]);
    for (int j = 1; j < 8; ++j) EXPECT_EQ(t[j], (x[j] + 2 * x[j - 1] + 1) % 32);
  }
  const Batch again = SyntheticSequences(32, 8, 7, 3, 4);
  EXPECT_EQ(again.ids, b.ids);
}

// The loss of the default model (V 32, h 32, a 8, f 128, s 8, L 4) on 8 sequences per step with AdamW
// (lr 1e-2) falls from about log 32 = 3.47 (3.98 at this initialization) to under a quarter of it in 100
// steps (0.09 at step 100; every target is a function of the two tokens before it, so the loss can reach 0).
TEST(GptTest, LossFallsOnSyntheticSequences) {
  GptConfig cfg;
  Gpt model(cfg);
  AdamWConfig acfg;
  acfg.lr = 1e-2f;
  AdamW opt(model.Parameters(), acfg);
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    model.ZeroGrad();
    const float loss = model.Forward(SyntheticSequences(cfg.vocab, cfg.seq, 1, step, 8));
    model.Backward();
    opt.Step();
    if (step == 0) first = loss;
    if (step % 25 == 0 || step == 99) std::printf("step %3d loss %.4f\n", step, loss);
    last = loss;
  }
  EXPECT_GT(first, std::log(32.0) - 0.5) << "an untrained model is close to uniform";
  EXPECT_LT(last, 0.25f * first) << "first " << first << " last " << last;
}

TEST(GptDeathTest, BadInputNamesTheProblem) {
  const GptConfig cfg = Small();
  GptEmbedding emb(cfg);
  EXPECT_DEATH(emb.Forward({1, 2, 3}), "3 rows are not whole sequences of 4 tokens");
  GptConfig bad = cfg;
  bad.heads = 3;
  EXPECT_DEATH(GptBlock("b", bad), "hidden 8 is not divisible by 3 heads");
}

}  // namespace
}  // namespace distlab::nn
