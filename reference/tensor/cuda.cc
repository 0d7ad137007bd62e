#include "reference/tensor/cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <utility>

#include "reference/tensor/cuda_kernels.h"

namespace distlab::tensor::cuda {
namespace {

std::string Where(const char* file, int line) {
  std::string f(file);
  const size_t p = f.rfind("reference/");
  return (p == std::string::npos ? f : f.substr(p)) + ":" + std::to_string(line);
}

void CheckCuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  Fail(call, std::string("failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") at " +
                 Where(file, line));
}

void CheckCublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  Fail(call, std::string("failed: ") + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ") at " +
                 Where(file, line));
}

#define DISTLAB_CUDA_CHECK(call) CheckCuda((call), #call, __FILE__, __LINE__)
#define DISTLAB_CUBLAS_CHECK(call) CheckCublas((call), #call, __FILE__, __LINE__)

int CurrentDevice() {
  int d = 0;
  DISTLAB_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// Makes `device` current for the scope (restores the previous one).
class OnDevice {
 public:
  explicit OnDevice(int device) : previous_(CurrentDevice()) {
    if (device != previous_) DISTLAB_CUDA_CHECK(cudaSetDevice(device));
  }
  ~OnDevice() { cudaSetDevice(previous_); }

 private:
  int previous_;
};

// One cuBLAS handle per thread and device.
cublasHandle_t Handle(int device) {
  thread_local std::map<int, cublasHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  DISTLAB_CUBLAS_CHECK(cublasCreate(&h));
  handles[device] = h;
  return h;
}

#define DISTLAB_KERNEL(call) CheckCuda(static_cast<cudaError_t>(call), #call, __FILE__, __LINE__)

void SameShape(const char* where, const DeviceTensor& a, const DeviceTensor& b) {
  if (a.shape() != b.shape()) {
    Fail(where, "shapes differ: " + ShapeString(a.shape()) + " vs " + ShapeString(b.shape()));
  }
  if (a.device() != b.device()) {
    Fail(where,
         "tensors on different devices: " + std::to_string(a.device()) + " vs " + std::to_string(b.device()));
  }
}

}  // namespace

int DeviceCount(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return 0;
  }
  return n;
}

DeviceTensor::DeviceTensor(Shape shape, DType dtype, int device, MemCategory category, MemoryTracker* tracker)
    : shape_(std::move(shape)),
      dtype_(dtype),
      device_(device < 0 ? CurrentDevice() : device),
      category_(category),
      tracker_(tracker) {
  numel_ = NumElements(shape_);
  if (numel_ == 0) return;
  OnDevice on(device_);
  DISTLAB_CUDA_CHECK(cudaMalloc(&data_, bytes()));
  DISTLAB_CUDA_CHECK(cudaMemset(data_, 0, bytes()));
  if (tracker_ != nullptr) tracker_->Allocate(category_, bytes());
}

DeviceTensor::~DeviceTensor() { Free(); }

void DeviceTensor::Free() {
  if (data_ == nullptr) return;
  {
    OnDevice on(device_);
    cudaFree(data_);
  }
  if (tracker_ != nullptr) tracker_->Free(category_, bytes());
  data_ = nullptr;
}

DeviceTensor::DeviceTensor(DeviceTensor&& o) noexcept
    : shape_(std::move(o.shape_)),
      numel_(o.numel_),
      dtype_(o.dtype_),
      device_(o.device_),
      category_(o.category_),
      tracker_(o.tracker_),
      data_(o.data_) {
  o.data_ = nullptr;
  o.numel_ = 0;
}

DeviceTensor& DeviceTensor::operator=(DeviceTensor&& o) noexcept {
  if (this != &o) {
    Free();
    shape_ = std::move(o.shape_);
    numel_ = o.numel_;
    dtype_ = o.dtype_;
    device_ = o.device_;
    category_ = o.category_;
    tracker_ = o.tracker_;
    data_ = o.data_;
    o.data_ = nullptr;
    o.numel_ = 0;
  }
  return *this;
}

int64_t DeviceTensor::dim(int i) const {
  const int n = static_cast<int>(shape_.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) Fail("DeviceTensor::dim", "dimension out of range for shape " + ShapeString(shape_));
  return shape_[i];
}

float* DeviceTensor::f32() {
  if (dtype_ != DType::kF32) Fail("DeviceTensor::f32", std::string("the tensor is ") + Name(dtype_));
  return static_cast<float*>(data_);
}
const float* DeviceTensor::f32() const { return const_cast<DeviceTensor*>(this)->f32(); }
uint16_t* DeviceTensor::bf16() {
  if (dtype_ != DType::kBF16) Fail("DeviceTensor::bf16", std::string("the tensor is ") + Name(dtype_));
  return static_cast<uint16_t*>(data_);
}
const uint16_t* DeviceTensor::bf16() const { return const_cast<DeviceTensor*>(this)->bf16(); }

DeviceTensor ToDevice(const Tensor& host, int device, MemCategory category) {
  DeviceTensor dev(host.shape(), host.dtype(), device, category);
  CopyToDevice(host, dev);
  return dev;
}

Tensor ToHost(const DeviceTensor& dev, MemCategory category) {
  Tensor host(dev.shape(), dev.dtype(), category);
  CopyToHost(dev, host);
  return host;
}

void CopyToDevice(const Tensor& host, DeviceTensor& dev) {
  if (host.shape() != dev.shape() || host.dtype() != dev.dtype()) {
    Fail("CopyToDevice", "host " + ShapeString(host.shape()) + " " + Name(host.dtype()) + " vs device " +
                             ShapeString(dev.shape()) + " " + Name(dev.dtype()));
  }
  if (dev.bytes() == 0) return;
  OnDevice on(dev.device());
  DISTLAB_CUDA_CHECK(cudaMemcpy(dev.raw(), host.raw(), dev.bytes(), cudaMemcpyHostToDevice));
}

void CopyToHost(const DeviceTensor& dev, Tensor& host) {
  if (host.shape() != dev.shape() || host.dtype() != dev.dtype()) {
    Fail("CopyToHost", "device " + ShapeString(dev.shape()) + " " + Name(dev.dtype()) + " vs host " +
                           ShapeString(host.shape()) + " " + Name(host.dtype()));
  }
  if (dev.bytes() == 0) return;
  OnDevice on(dev.device());
  DISTLAB_CUDA_CHECK(cudaMemcpy(host.raw(), dev.raw(), dev.bytes(), cudaMemcpyDeviceToHost));
}

void Copy(const DeviceTensor& src, DeviceTensor& dst) {
  SameShape("cuda::Copy", src, dst);
  if (src.numel() == 0) return;
  OnDevice on(dst.device());
  const size_t n = static_cast<size_t>(src.numel());
  if (src.dtype() == dst.dtype()) {
    DISTLAB_CUDA_CHECK(cudaMemcpy(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice));
  } else if (src.dtype() == DType::kF32) {
    DISTLAB_KERNEL(kernels::F32ToBF16(src.f32(), dst.bf16(), n));
  } else {
    DISTLAB_KERNEL(kernels::BF16ToF32(src.bf16(), dst.f32(), n));
  }
}

void Gemm(bool trans_a, bool trans_b, float alpha, const DeviceTensor& a, const DeviceTensor& b, float beta,
          DeviceTensor& c) {
  if (a.shape().size() != 2 || b.shape().size() != 2 || c.shape().size() != 2) {
    Fail("cuda::Gemm", "needs 2-D tensors, got " + ShapeString(a.shape()) + ", " + ShapeString(b.shape()) +
                           ", " + ShapeString(c.shape()));
  }
  const int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb || c.dim(0) != m || c.dim(1) != n) {
    Fail("cuda::Gemm", std::string("shapes do not chain: op(A) ") + "[" + std::to_string(m) + ", " +
                           std::to_string(k) + "] @ op(B) [" + std::to_string(kb) + ", " + std::to_string(n) +
                           "] into C " + ShapeString(c.shape()));
  }
  if (a.dtype() != b.dtype())
    Fail("cuda::Gemm", std::string("A is ") + Name(a.dtype()) + ", B is " + Name(b.dtype()));
  if (c.dtype() != DType::kF32) Fail("cuda::Gemm", "C must be f32 (bf16 inputs accumulate and write in f32)");
  if (a.device() != b.device() || a.device() != c.device())
    Fail("cuda::Gemm", "tensors on different devices");
  if (m == 0 || n == 0) return;
  OnDevice on(c.device());
  cublasHandle_t h = Handle(c.device());
  // Row-major C[M,N] = op(A) op(B) is column-major C^T[N,M] = op(B)^T op(A)^T: swap the operands.
  const cublasOperation_t opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(a.dim(1)), ldb = static_cast<int>(b.dim(1)), ldc = static_cast<int>(n);
  if (a.dtype() == DType::kF32) {
    DISTLAB_CUBLAS_CHECK(cublasSgemm(h, opb, opa, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &alpha, b.f32(), ldb, a.f32(), lda, &beta, c.f32(),
                                     ldc));
  } else {
    DISTLAB_CUBLAS_CHECK(cublasGemmEx(h, opb, opa, static_cast<int>(n), static_cast<int>(m),
                                      static_cast<int>(k), &alpha, b.raw(), CUDA_R_16BF, ldb, a.raw(),
                                      CUDA_R_16BF, lda, &beta, c.raw(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  }
}

void Fill(DeviceTensor& t, float value) {
  OnDevice on(t.device());
  DISTLAB_KERNEL(kernels::Fill(t.f32(), t.numel(), value));
}

void Scale(DeviceTensor& t, float alpha) {
  OnDevice on(t.device());
  DISTLAB_KERNEL(kernels::Scale(t.f32(), t.numel(), alpha));
}

void Axpy(float alpha, const DeviceTensor& x, DeviceTensor& y) {
  SameShape("cuda::Axpy", x, y);
  OnDevice on(y.device());
  DISTLAB_KERNEL(kernels::Axpy(alpha, x.f32(), y.f32(), y.numel()));
}

void AddRowBias(const DeviceTensor& bias, DeviceTensor& y) {
  if (y.shape().size() != 2 || bias.shape() != Shape{y.dim(1)}) {
    Fail("cuda::AddRowBias",
         "bias " + ShapeString(bias.shape()) + " does not match the columns of y " + ShapeString(y.shape()));
  }
  OnDevice on(y.device());
  DISTLAB_KERNEL(kernels::AddRowBias(bias.f32(), y.f32(), y.dim(0), y.dim(1)));
}

void GeluForward(const DeviceTensor& x, DeviceTensor& y) {
  SameShape("cuda::GeluForward", x, y);
  OnDevice on(y.device());
  DISTLAB_KERNEL(kernels::GeluForward(x.f32(), y.f32(), y.numel()));
}

void GeluBackward(const DeviceTensor& x, const DeviceTensor& dy, DeviceTensor& dx) {
  SameShape("cuda::GeluBackward", x, dy);
  SameShape("cuda::GeluBackward", x, dx);
  OnDevice on(dx.device());
  DISTLAB_KERNEL(kernels::GeluBackward(x.f32(), dy.f32(), dx.f32(), dx.numel()));
}

void Synchronize(int device) {
  OnDevice on(device < 0 ? CurrentDevice() : device);
  DISTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace distlab::tensor::cuda
