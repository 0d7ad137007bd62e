// Tensor operations of the course runtime: GEMM and the elementwise kernels the layers need.
//
// Every op checks shapes, dtypes (f32 compute; bf16 tensors are converted with Tensor::To) and device, and
// dispatches on the device: kCpu runs here (GEMM through OpenBLAS's cblas_sgemm); kCuda aborts with a
// message until a cuBLAS backend lands behind these same signatures.
//
// Threads: ranks are threads on the threads backend, so OpenBLAS's own thread pool would oversubscribe the
// cores (n ranks x m BLAS threads). The first GEMM sets OpenBLAS to one thread per call unless
// OPENBLAS_NUM_THREADS is set in the environment (the benchmark sets it to measure the library's peak).
#ifndef DISTLAB_REFERENCE_TENSOR_OPS_H_
#define DISTLAB_REFERENCE_TENSOR_OPS_H_

#include "reference/tensor/tensor.h"

namespace distlab::tensor {

// C = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T; all 2-D f32. C must be allocated with the result
// shape [M, N] (beta = 0 ignores its contents).
void Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c);
// A new [M, N] tensor op(A) @ op(B), counted under `category`.
Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false,
              MemCategory category = MemCategory::kActivations);
// Raw GEMM on row-major float arrays (the kernel the Tensor versions call).
void GemmRaw(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
             const float* b, int ldb, float beta, float* c, int ldc);
// Sets the threads OpenBLAS may use per call (1 by default; see the file comment).
void SetBlasThreads(int threads);
int BlasThreads();

// Elementwise, same shape and f32 unless stated.
void Fill(Tensor& t, float value);
void Scale(Tensor& t, float alpha);                       // t *= alpha
void Axpy(float alpha, const Tensor& x, Tensor& y);       // y += alpha * x
void Copy(const Tensor& src, Tensor& dst);                // dst = src (any dtypes; rounds into bf16)
Tensor Add(const Tensor& a, const Tensor& b);             // a + b (new, category of a)
void Mul(const Tensor& a, const Tensor& b, Tensor& out);  // out = a * b
// y[r, :] += bias for each row r of y [R, C]; bias [C].
void AddRowBias(const Tensor& bias, Tensor& y);
// out[c] += sum over rows r of x[r, c]; x [R, C], out [C].
void SumRowsInto(const Tensor& x, Tensor& out);

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void GeluForward(const Tensor& x, Tensor& y);
// dx = dy * GELU'(x).
void GeluBackward(const Tensor& x, const Tensor& dy, Tensor& dx);

// max |a[i] - b[i]|; AllClose: same shape and |a[i] - b[i]| <= atol + rtol |b[i]| everywhere.
float MaxAbsDiff(const Tensor& a, const Tensor& b);
bool AllClose(const Tensor& a, const Tensor& b, float rtol, float atol);
// sum of x[i]^2 as double.
double SquaredNorm(const Tensor& x);

}  // namespace distlab::tensor

#endif  // DISTLAB_REFERENCE_TENSOR_OPS_H_
