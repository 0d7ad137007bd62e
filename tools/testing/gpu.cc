#include "tools/testing/gpu.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

namespace distlab::testing {
namespace {

absl::Status CudaStatus(const char* call, cudaError_t e) {
  if (e == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

}  // namespace

int GpuCount(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string(" (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
    return 0;
  }
  return n;
}

std::string GpuSkipReason(int needed) {
  std::string why;
  const int found = GpuCount(&why);
  if (found >= needed) return "";
  return "needs " + std::to_string(needed) + (needed == 1 ? " GPU" : " GPUs") + ", found " +
         std::to_string(found) + why;
}

int GpuRanks() {
  if (const char* env = std::getenv("DISTLAB_GPU_RANKS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return 1;
}

DeviceBuffer::DeviceBuffer(int device, size_t bytes) : device_(device), bytes_(bytes) {
  status_ = CudaStatus("cudaSetDevice", cudaSetDevice(device));
  if (status_.ok() && bytes > 0) status_ = CudaStatus("cudaMalloc", cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) {
    cudaSetDevice(device_);
    cudaFree(ptr_);
  }
}

absl::Status DeviceBuffer::Upload(const void* host, size_t bytes) {
  if (!status_.ok()) return status_;
  if (bytes > bytes_)
    return absl::InvalidArgumentError("DeviceBuffer::Upload: more bytes than the buffer holds");
  if (bytes == 0) return absl::OkStatus();
  absl::Status s = CudaStatus("cudaSetDevice", cudaSetDevice(device_));
  if (!s.ok()) return s;
  return CudaStatus("cudaMemcpy (host to device)", cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

absl::Status DeviceBuffer::Download(void* host, size_t bytes) const {
  if (!status_.ok()) return status_;
  if (bytes > bytes_)
    return absl::InvalidArgumentError("DeviceBuffer::Download: more bytes than the buffer holds");
  if (bytes == 0) return absl::OkStatus();
  absl::Status s = CudaStatus("cudaSetDevice", cudaSetDevice(device_));
  if (!s.ok()) return s;
  return CudaStatus("cudaMemcpy (device to host)", cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace distlab::testing
