// cuBLAS GEMM throughput on GPU 0: C[M,N] = A[M,K] @ B[K,N] for square sizes, f32 (cublasSgemm) and bf16
// inputs with f32 accumulation (cublasGemmEx), timed with CUDA events over repeated calls after a warm-up.
// Prints an aligned table (size, dtype, ms per GEMM, TFLOP/s = 2 M N K / time) and a last line
// "gemm: best bf16 <x> TFLOP/s, best f32 <y> TFLOP/s". Exits 2 with a message when no GPU is found.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "reference/tensor/cuda.h"
#include "reference/tensor/tensor.h"

namespace {

using distlab::tensor::DType;
using distlab::tensor::cuda::DeviceTensor;

// Milliseconds per GEMM (mean of `reps` after 3 warm-up calls).
double TimeGemm(int64_t n, DType dtype, int reps) {
  DeviceTensor a({n, n}, dtype, 0), b({n, n}, dtype, 0), c({n, n}, DType::kF32, 0);
  for (int i = 0; i < 3; ++i) distlab::tensor::cuda::Gemm(false, false, 1.0f, a, b, 0.0f, c);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < reps; ++i) distlab::tensor::cuda::Gemm(false, false, 1.0f, a, b, 0.0f, c);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / reps;
}

}  // namespace

int main() {
  std::string why;
  if (distlab::tensor::cuda::DeviceCount(&why) < 1) {
    std::fprintf(stderr, "gemm_gpu_bench: needs 1 GPU, found 0 (%s)\n", why.c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("cuBLAS GEMM on GPU 0 (%s)\n", prop.name);
  std::printf("%8s  %-6s  %12s  %10s\n", "M=N=K", "dtype", "ms/GEMM", "TFLOP/s");
  double best_f32 = 0, best_bf16 = 0;
  for (int64_t n : {1024, 4096, 8192}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const int reps = n <= 1024 ? 50 : n <= 4096 ? 20 : 10;
      const double ms = TimeGemm(n, dtype, reps);
      const double tflops = 2.0 * n * n * n / (ms / 1e3) / 1e12;
      std::printf("%8lld  %-6s  %12.3f  %10.1f\n", static_cast<long long>(n), distlab::tensor::Name(dtype),
                  ms, tflops);
      (dtype == DType::kF32 ? best_f32 : best_bf16) =
          std::max(dtype == DType::kF32 ? best_f32 : best_bf16, tflops);
    }
  }
  std::printf("gemm: best bf16 %.1f TFLOP/s, best f32 %.1f TFLOP/s\n", best_bf16, best_f32);
  return 0;
}
