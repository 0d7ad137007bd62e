// Tests of GEMM (against a naive triple loop) and the elementwise kernels.
#include "reference/tensor/ops.h"

#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "reference/tensor/random.h"

namespace distlab::tensor {
namespace {

// C = op(A) op(B) by the definition, in double.
std::vector<double> NaiveGemm(bool ta, bool tb, const Tensor& a, const Tensor& b) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a.Get(p * a.dim(1) + i) : a.Get(i * a.dim(1) + p);
        const double y = tb ? b.Get(j * b.dim(1) + p) : b.Get(p * b.dim(1) + j);
        c[i * n + j] += x * y;
      }
  return c;
}

TEST(Gemm, MatchesTheDefinitionForEveryTransposeAndBeta) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t m = 5, n = 7, k = 3;
      Tensor a(ta ? Shape{k, m} : Shape{m, k}), b(tb ? Shape{n, k} : Shape{k, n}), c({m, n});
      FillNormal(a, 1, 1.f);
      FillNormal(b, 2, 1.f);
      FillNormal(c, 3, 1.f);
      const Tensor c0 = c;
      Gemm(ta, tb, 2.f, a, b, 0.5f, c);
      const std::vector<double> ref = NaiveGemm(ta, tb, a, b);
      for (int64_t i = 0; i < m * n; ++i) {
        EXPECT_NEAR(c.Get(i), 2.0 * ref[i] + 0.5 * c0.Get(i), 1e-4) << "ta=" << ta << " tb=" << tb;
      }
    }
  }
  EXPECT_EQ(BlasThreads() >= 1, true);
}

TEST(Gemm, ZeroInnerDimensionScalesC) {
  Tensor a({2, 0}), b({0, 3}), c({2, 3});
  Fill(c, 4.f);
  Gemm(false, false, 1.f, a, b, 0.5f, c);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c.Get(i), 2.f);
}

TEST(GemmDeathTest, ShapeMismatchNamesShapes) {
  Tensor a({2, 3}), b({4, 5});
  EXPECT_DEATH(MatMul(a, b), "\\[2, 3\\].*\\[4, 5\\].*disagree");
}

TEST(Gemm, ConcurrentCallsFromRankThreadsAgree) {
  // Ranks are threads: every thread runs the same GEMM and must get the same bits.
  Tensor a({64, 48}), b({48, 32});
  FillNormal(a, 4, 1.f);
  FillNormal(b, 5, 1.f);
  const Tensor ref = MatMul(a, b);
  std::vector<std::thread> threads;
  std::vector<float> diff(4, -1.f);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] { diff[r] = MaxAbsDiff(MatMul(a, b), ref); });
  }
  for (auto& t : threads) t.join();
  for (float d : diff) EXPECT_EQ(d, 0.f);
}

TEST(Elementwise, AxpyScaleBiasSums) {
  Tensor x = Tensor::FromVector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::FromVector({2, 3}, {1, 1, 1, 1, 1, 1});
  Axpy(2.f, x, y);
  EXPECT_EQ(y.ToVector(), (std::vector<float>{3, 5, 7, 9, 11, 13}));
  Scale(y, 0.5f);
  EXPECT_EQ(y.ToVector(), (std::vector<float>{1.5, 2.5, 3.5, 4.5, 5.5, 6.5}));
  Tensor bias = Tensor::FromVector({3}, {10, 20, 30});
  AddRowBias(bias, x);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  Tensor sums({3});
  SumRowsInto(x, sums);
  EXPECT_EQ(sums.ToVector(), (std::vector<float>{25, 47, 69}));
  Tensor p({2, 3});
  Mul(x, y, p);
  EXPECT_FLOAT_EQ(p.Get(5), 36 * 6.5f);
  EXPECT_EQ(Add(x, x).Get(0), 22.f);
  EXPECT_DOUBLE_EQ(SquaredNorm(bias), 1400.0);
  Tensor h({2, 3}, DType::kBF16);
  Copy(x, h);
  EXPECT_EQ(h.Get(1), 22.f);
  EXPECT_TRUE(AllClose(x, x, 0.f, 0.f));
  EXPECT_FALSE(AllClose(x, y, 1e-3f, 1e-3f));
}

TEST(Elementwise, GeluAndItsDerivative) {
  Tensor x = Tensor::FromVector({5}, {-3.f, -1.f, 0.f, 0.5f, 2.f});
  Tensor y({5}), dx({5}), ones({5});
  Fill(ones, 1.f);
  GeluForward(x, y);
  EXPECT_FLOAT_EQ(y.Get(2), 0.f);
  EXPECT_NEAR(y.Get(4), 1.9546f, 1e-4);   // GELU(2) with the tanh approximation
  EXPECT_NEAR(y.Get(1), -0.1588f, 1e-4);  // GELU(-1)
  GeluBackward(x, ones, dx);
  for (int i = 0; i < 5; ++i) {  // central differences in double
    const double v = x.Get(i), h = 1e-3;
    auto g = [](double u) {
      return 0.5 * u * (1 + std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)));
    };
    EXPECT_NEAR(dx.Get(i), (g(v + h) - g(v - h)) / (2 * h), 1e-4) << "x=" << v;
  }
}

}  // namespace
}  // namespace distlab::tensor
