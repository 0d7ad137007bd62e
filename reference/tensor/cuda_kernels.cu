// Elementwise kernels of the course's CUDA tensors: grid-stride loops, one thread per element.
#include <cuda_runtime.h>

#include "reference/tensor/cuda_kernels.h"

namespace distlab::tensor::cuda::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

#define DISTLAB_FOR_EACH(i, n)                                                         \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void FillKernel(float* x, size_t n, float value) { DISTLAB_FOR_EACH(i, n) x[i] = value; }
__global__ void ScaleKernel(float* x, size_t n, float alpha) { DISTLAB_FOR_EACH(i, n) x[i] *= alpha; }
__global__ void AxpyKernel(float alpha, const float* x, float* y, size_t n) {
  DISTLAB_FOR_EACH(i, n) y[i] += alpha * x[i];
}

__device__ uint16_t ToBF16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

__global__ void F32ToBF16Kernel(const float* in, uint16_t* out, size_t n) {
  DISTLAB_FOR_EACH(i, n) out[i] = ToBF16(in[i]);
}
__global__ void BF16ToF32Kernel(const uint16_t* in, float* out, size_t n) {
  DISTLAB_FOR_EACH(i, n) out[i] = __uint_as_float(static_cast<uint32_t>(in[i]) << 16);
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

__global__ void GeluForwardKernel(const float* x, float* y, size_t n) {
  DISTLAB_FOR_EACH(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCoeff * v * v * v)));
  }
}
// d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u',  u' = sqrt(2/pi) (1 + 3 c x^2).
__global__ void GeluBackwardKernel(const float* x, const float* dy, float* dx, size_t n) {
  DISTLAB_FOR_EACH(i, n) {
    const float v = x[i];
    const float t = tanhf(kSqrt2OverPi * (v + kCoeff * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}
__global__ void AddRowBiasKernel(const float* bias, float* y, size_t rows, size_t cols) {
  DISTLAB_FOR_EACH(i, rows * cols) y[i] += bias[i % cols];
}

int Done() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

int Fill(float* x, size_t n, float value) {
  if (n == 0) return 0;
  FillKernel<<<Blocks(n), kThreads>>>(x, n, value);
  return Done();
}
int Scale(float* x, size_t n, float alpha) {
  if (n == 0) return 0;
  ScaleKernel<<<Blocks(n), kThreads>>>(x, n, alpha);
  return Done();
}
int Axpy(float alpha, const float* x, float* y, size_t n) {
  if (n == 0) return 0;
  AxpyKernel<<<Blocks(n), kThreads>>>(alpha, x, y, n);
  return Done();
}
int F32ToBF16(const float* in, uint16_t* out, size_t n) {
  if (n == 0) return 0;
  F32ToBF16Kernel<<<Blocks(n), kThreads>>>(in, out, n);
  return Done();
}
int BF16ToF32(const uint16_t* in, float* out, size_t n) {
  if (n == 0) return 0;
  BF16ToF32Kernel<<<Blocks(n), kThreads>>>(in, out, n);
  return Done();
}
int GeluForward(const float* x, float* y, size_t n) {
  if (n == 0) return 0;
  GeluForwardKernel<<<Blocks(n), kThreads>>>(x, y, n);
  return Done();
}
int GeluBackward(const float* x, const float* dy, float* dx, size_t n) {
  if (n == 0) return 0;
  GeluBackwardKernel<<<Blocks(n), kThreads>>>(x, dy, dx, n);
  return Done();
}
int AddRowBias(const float* bias, float* y, size_t rows, size_t cols) {
  if (rows * cols == 0) return 0;
  AddRowBiasKernel<<<Blocks(rows * cols), kThreads>>>(bias, y, rows, cols);
  return Done();
}

}  // namespace distlab::tensor::cuda::kernels
