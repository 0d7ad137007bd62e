// Optimizer update rules, step by step against hand-computed values.
#include "reference/nn/optim.h"

#include <cmath>

#include "gtest/gtest.h"

namespace distlab::nn {
namespace {

TEST(AdamW, FirstStepsByHand) {
  Parameter p("p", {2});
  p.value.Set(0, 1.f);
  p.value.Set(1, -2.f);
  AdamWConfig cfg;
  cfg.lr = 0.1f;
  cfg.weight_decay = 0.5f;
  AdamW opt({&p}, cfg);
  p.grad.Set(0, 0.2f);
  p.grad.Set(1, -4.f);
  opt.Step();
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) = lr * sign(g) (eps aside);
  // decay first: p = p (1 - lr wd).
  EXPECT_NEAR(p.value.Get(0), 1.f * 0.95f - 0.1f, 1e-6);
  EXPECT_NEAR(p.value.Get(1), -2.f * 0.95f + 0.1f, 1e-6);
  // Step 2 with g = 0 on element 0: m = 0.9 * 0.02 = 0.018 (not bias-free), v = 0.999 * 0.0004.
  p.grad.Set(0, 0.f);
  const double p0 = p.value.Get(0);
  opt.Step();
  const double m = 0.9 * 0.1 * 0.2, v = 0.999 * 0.001 * 0.04;
  const double mhat = m / (1 - 0.81), vhat = v / (1 - 0.999 * 0.999);
  EXPECT_NEAR(p.value.Get(0), p0 * 0.95 - 0.1 * mhat / (std::sqrt(vhat) + 1e-8), 1e-6);
  EXPECT_EQ(opt.step(), 2);
  EXPECT_EQ(opt.StateBytes(), 16u);
}

TEST(AdamW, ShardedKernelEqualsWholeTensorUpdate) {
  // ZeRO applies AdamWUpdate to slices: slicing must not change the arithmetic.
  std::vector<float> p(10), g(10), m(10, 0.f), v(10, 0.f);
  for (int i = 0; i < 10; ++i) p[i] = 0.1f * i, g[i] = 0.3f - 0.07f * i;
  std::vector<float> p2 = p, m2 = m, v2 = v;
  AdamWConfig cfg;
  AdamWUpdate(cfg, 1, p.data(), g.data(), m.data(), v.data(), 10);
  AdamWUpdate(cfg, 1, p2.data(), g.data(), m2.data(), v2.data(), 3);
  AdamWUpdate(cfg, 1, p2.data() + 3, g.data() + 3, m2.data() + 3, v2.data() + 3, 7);
  EXPECT_EQ(p, p2);
}

TEST(Sgd, MomentumAndWeightDecayByHand) {
  Parameter p("p", {1});
  p.value.Set(0, 1.f);
  SgdConfig cfg{/*lr=*/0.1f, /*momentum=*/0.9f, /*weight_decay=*/0.1f};
  Sgd opt({&p}, cfg);
  p.grad.Set(0, 1.f);
  opt.Step();  // d = 1 + 0.1 = 1.1; buf = 1.1; p = 1 - 0.11 = 0.89
  EXPECT_NEAR(p.value.Get(0), 0.89f, 1e-6);
  opt.Step();  // d = 1 + 0.089 = 1.089; buf = 0.99 + 1.089 = 2.079; p = 0.89 - 0.2079
  EXPECT_NEAR(p.value.Get(0), 0.89f - 0.2079f, 1e-6);
  EXPECT_EQ(opt.StateBytes(), 4u);
  Parameter q("q", {1});
  Sgd plain({&q}, {0.5f, 0.f, 0.f});
  q.grad.Set(0, 2.f);
  plain.Step();
  EXPECT_EQ(q.value.Get(0), -1.f);
  EXPECT_EQ(plain.StateBytes(), 0u);
}

}  // namespace
}  // namespace distlab::nn
