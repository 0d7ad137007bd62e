#include "reference/tensor/ops.h"

#include <cblas.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>

namespace distlab::tensor {
namespace {

std::atomic<int> g_blas_threads{0};
std::once_flag g_blas_once;

void EnsureBlasThreads() {
  std::call_once(g_blas_once, [] {
    if (g_blas_threads.load() == 0) {
      const char* env = std::getenv("OPENBLAS_NUM_THREADS");
      g_blas_threads.store(env != nullptr ? std::max(1, std::atoi(env)) : 1);
    }
    openblas_set_num_threads(g_blas_threads.load());
  });
}

void CheckCpu(const Tensor& t, const char* op) {
  if (t.device() != Device::kCpu) {
    Fail(op, std::string("no ") + Name(t.device()) + " kernel in this runtime (cpu only)");
  }
}

void CheckF32(const Tensor& t, const char* op) {
  CheckCpu(t, op);
  if (t.dtype() != DType::kF32) {
    Fail(op, std::string("expects f32, got ") + Name(t.dtype()) + ShapeString(t.shape()) +
                 " (convert with Tensor::To)");
  }
}

void CheckSameShape(const Tensor& a, const Tensor& b, const char* op) {
  if (a.shape() != b.shape()) {
    Fail(op, "shapes differ: " + ShapeString(a.shape()) + " vs " + ShapeString(b.shape()));
  }
}

void Check2D(const Tensor& t, const char* op, const char* which) {
  if (t.ndim() != 2) {
    Fail(op, std::string(which) + " must be 2-D, got " + ShapeString(t.shape()));
  }
}

}  // namespace

void SetBlasThreads(int threads) {
  g_blas_threads.store(std::max(1, threads));
  std::call_once(g_blas_once, [] {});
  openblas_set_num_threads(g_blas_threads.load());
}

int BlasThreads() {
  EnsureBlasThreads();
  return g_blas_threads.load();
}

void GemmRaw(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
             const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // degenerate: C = beta C (BLAS would also do this, but spell it out)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  EnsureBlasThreads();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c) {
  CheckF32(a, "Gemm");
  CheckF32(b, "Gemm");
  CheckF32(c, "Gemm");
  Check2D(a, "Gemm", "A");
  Check2D(b, "Gemm", "B");
  Check2D(c, "Gemm", "C");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb || c.dim(0) != m || c.dim(1) != n) {
    Fail("Gemm", std::string("op(A)") + (trans_a ? "=A^T" : "=A") + " of " + ShapeString(a.shape()) +
                     " times op(B)" + (trans_b ? "=B^T" : "=B") + " of " + ShapeString(b.shape()) +
                     " into C of " + ShapeString(c.shape()) + ": inner dimensions or output shape disagree");
  }
  GemmRaw(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a.f32(),
          static_cast<int>(a.dim(1)), b.f32(), static_cast<int>(b.dim(1)), beta, c.f32(),
          static_cast<int>(c.dim(1)));
}

Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, MemCategory category) {
  Check2D(a, "MatMul", "A");
  Check2D(b, "MatMul", "B");
  Tensor c({trans_a ? a.dim(1) : a.dim(0), trans_b ? b.dim(0) : b.dim(1)}, DType::kF32, category);
  Gemm(trans_a, trans_b, 1.f, a, b, 0.f, c);
  return c;
}

void Fill(Tensor& t, float value) {
  CheckCpu(t, "Fill");
  for (int64_t i = 0; i < t.numel(); ++i) t.Set(i, value);
}

void Scale(Tensor& t, float alpha) {
  CheckF32(t, "Scale");
  float* p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] *= alpha;
}

void Axpy(float alpha, const Tensor& x, Tensor& y) {
  CheckF32(x, "Axpy");
  CheckF32(y, "Axpy");
  CheckSameShape(x, y, "Axpy");
  const float* px = x.f32();
  float* py = y.f32();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] += alpha * px[i];
}

void Copy(const Tensor& src, Tensor& dst) {
  CheckCpu(src, "Copy");
  CheckCpu(dst, "Copy");
  if (src.numel() != dst.numel()) {
    Fail("Copy", "sizes differ: " + ShapeString(src.shape()) + " vs " + ShapeString(dst.shape()));
  }
  for (int64_t i = 0; i < src.numel(); ++i) dst.Set(i, src.Get(i));
}

Tensor Add(const Tensor& a, const Tensor& b) {
  Tensor out(a);
  Axpy(1.f, b, out);
  return out;
}

void Mul(const Tensor& a, const Tensor& b, Tensor& out) {
  CheckF32(a, "Mul");
  CheckF32(b, "Mul");
  CheckF32(out, "Mul");
  CheckSameShape(a, b, "Mul");
  CheckSameShape(a, out, "Mul");
  for (int64_t i = 0; i < a.numel(); ++i) out.f32()[i] = a.f32()[i] * b.f32()[i];
}

void AddRowBias(const Tensor& bias, Tensor& y) {
  CheckF32(bias, "AddRowBias");
  CheckF32(y, "AddRowBias");
  Check2D(y, "AddRowBias", "y");
  if (bias.numel() != y.dim(1)) {
    Fail("AddRowBias",
         "bias " + ShapeString(bias.shape()) + " does not match the rows of y " + ShapeString(y.shape()));
  }
  const int64_t rows = y.dim(0), cols = y.dim(1);
  float* py = y.f32();
  const float* pb = bias.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) py[r * cols + c] += pb[c];
}

void SumRowsInto(const Tensor& x, Tensor& out) {
  CheckF32(x, "SumRowsInto");
  CheckF32(out, "SumRowsInto");
  Check2D(x, "SumRowsInto", "x");
  if (out.numel() != x.dim(1)) {
    Fail("SumRowsInto",
         "out " + ShapeString(out.shape()) + " does not match the columns of x " + ShapeString(x.shape()));
  }
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const float* px = x.f32();
  float* po = out.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) po[c] += px[r * cols + c];
}

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;
}  // namespace

void GeluForward(const Tensor& x, Tensor& y) {
  CheckF32(x, "GeluForward");
  CheckF32(y, "GeluForward");
  CheckSameShape(x, y, "GeluForward");
  const float* px = x.f32();
  float* py = y.f32();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = px[i];
    py[i] = 0.5f * v * (1.f + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
}

void GeluBackward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  CheckF32(x, "GeluBackward");
  CheckF32(dy, "GeluBackward");
  CheckF32(dx, "GeluBackward");
  CheckSameShape(x, dy, "GeluBackward");
  CheckSameShape(x, dx, "GeluBackward");
  const float* px = x.f32();
  const float* pdy = dy.f32();
  float* pdx = dx.f32();
  for (int64_t i = 0; i < x.numel(); ++i) {
    // d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u',  u' = c (1 + 3a x^2).
    const float v = px[i];
    const float t = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    const float du = kGeluC * (1.f + 3.f * kGeluA * v * v);
    pdx[i] = pdy[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
  }
}

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) {
    Fail("MaxAbsDiff", "sizes differ: " + ShapeString(a.shape()) + " vs " + ShapeString(b.shape()));
  }
  float m = 0.f;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.Get(i) - b.Get(i)));
  return m;
}

bool AllClose(const Tensor& a, const Tensor& b, float rtol, float atol) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.Get(i), y = b.Get(i);
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) return false;
  }
  return true;
}

double SquaredNorm(const Tensor& x) {
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += static_cast<double>(x.Get(i)) * x.Get(i);
  return s;
}

}  // namespace distlab::tensor
