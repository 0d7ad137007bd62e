// The elementwise CUDA kernels behind reference/tensor/cuda.h (compiled by nvcc for sm_80 and sm_90).
// Raw launchers on device pointers; each launches on the current device's default stream and returns the
// launch's cudaError_t as an int (0 = success), so this header needs no CUDA include.
#ifndef DISTLAB_REFERENCE_TENSOR_CUDA_KERNELS_H_
#define DISTLAB_REFERENCE_TENSOR_CUDA_KERNELS_H_

#include <cstddef>
#include <cstdint>

namespace distlab::tensor::cuda::kernels {

int Fill(float* x, size_t n, float value);
int Scale(float* x, size_t n, float alpha);
int Axpy(float alpha, const float* x, float* y, size_t n);
// bf16 <-> f32 (round to nearest even, NaN stays a quiet NaN; the same bits as tensor::FloatToBF16).
int F32ToBF16(const float* in, uint16_t* out, size_t n);
int BF16ToF32(const uint16_t* in, float* out, size_t n);
// GELU, tanh approximation, and its derivative times dy.
int GeluForward(const float* x, float* y, size_t n);
int GeluBackward(const float* x, const float* dy, float* dx, size_t n);
// y[r, c] += bias[c], y of rows x cols.
int AddRowBias(const float* bias, float* y, size_t rows, size_t cols);

}  // namespace distlab::tensor::cuda::kernels

#endif  // DISTLAB_REFERENCE_TENSOR_CUDA_KERNELS_H_
