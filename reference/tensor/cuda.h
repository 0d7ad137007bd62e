// CUDA tensors beside the CPU ones: device buffers counted by the same MemoryTracker, copies host<->device,
// cuBLAS GEMM (f32, and bf16 inputs with f32 accumulation and output), and the elementwise kernels the
// layers need. The CPU API (tensor.h, ops.h) is unchanged; this is the device-side API alongside it.
//
// Built only where the CUDA toolkit exists (//reference/tensor:cuda is incompatible elsewhere). Everything
// runs on the current device's default stream, in order; copies to the host wait for the work before them.
// Misuse (shape or dtype mismatch) and CUDA/cuBLAS errors abort with a message naming the shapes or the
// failing call, its error and file:line -- the CHECK of this runtime, as in tensor.h.
//
// Memory: cudaMalloc only (never managed memory), one device per tensor (the device current when it was
// made, or the one given).
#ifndef DISTLAB_REFERENCE_TENSOR_CUDA_H_
#define DISTLAB_REFERENCE_TENSOR_CUDA_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "reference/tensor/memory.h"
#include "reference/tensor/tensor.h"

namespace distlab::tensor::cuda {

// Devices this process sees; 0 (with the reason in *why) when cudaGetDeviceCount fails.
int DeviceCount(std::string* why = nullptr);

// A contiguous f32 or bf16 tensor in one device's memory.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Zero-filled storage on `device` (-1: the current device), counted under `category` by `tracker`.
  explicit DeviceTensor(Shape shape, DType dtype = DType::kF32, int device = -1,
                        MemCategory category = MemCategory::kActivations,
                        MemoryTracker* tracker = CurrentTracker());
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;  // copies are explicit: Copy()
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  DeviceTensor(DeviceTensor&& other) noexcept;
  DeviceTensor& operator=(DeviceTensor&& other) noexcept;

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  int device() const { return device_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * SizeOf(dtype_); }
  bool allocated() const { return data_ != nullptr; }

  // Device pointers (abort on a dtype mismatch).
  float* f32();
  const float* f32() const;
  uint16_t* bf16();
  const uint16_t* bf16() const;
  void* raw() { return data_; }
  const void* raw() const { return data_; }

 private:
  void Free();

  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  int device_ = -1;
  MemCategory category_ = MemCategory::kActivations;
  MemoryTracker* tracker_ = nullptr;
  void* data_ = nullptr;
};

// Host <-> device. ToDevice/ToHost make new tensors of the same shape and dtype; the Copy* forms need equal
// shapes and dtypes.
DeviceTensor ToDevice(const Tensor& host, int device = -1, MemCategory category = MemCategory::kActivations);
Tensor ToHost(const DeviceTensor& dev, MemCategory category = MemCategory::kActivations);
void CopyToDevice(const Tensor& host, DeviceTensor& dev);
void CopyToHost(const DeviceTensor& dev, Tensor& host);
// dst = src on the device, any dtypes (rounding into bf16 to nearest even).
void Copy(const DeviceTensor& src, DeviceTensor& dst);

// C = alpha * op(A) @ op(B) + beta * C (row-major, as tensor::Gemm). A and B both f32 (cublasSgemm) or both
// bf16 (cublasGemmEx, f32 accumulation); C is f32 [M, N].
void Gemm(bool trans_a, bool trans_b, float alpha, const DeviceTensor& a, const DeviceTensor& b, float beta,
          DeviceTensor& c);

// Elementwise on f32 tensors of equal shape, as in ops.h.
void Fill(DeviceTensor& t, float value);
void Scale(DeviceTensor& t, float alpha);
void Axpy(float alpha, const DeviceTensor& x, DeviceTensor& y);
void AddRowBias(const DeviceTensor& bias, DeviceTensor& y);
void GeluForward(const DeviceTensor& x, DeviceTensor& y);
void GeluBackward(const DeviceTensor& x, const DeviceTensor& dy, DeviceTensor& dx);

// Waits for the work queued on `device`'s default stream (-1: the current device).
void Synchronize(int device = -1);

}  // namespace distlab::tensor::cuda

#endif  // DISTLAB_REFERENCE_TENSOR_CUDA_H_
