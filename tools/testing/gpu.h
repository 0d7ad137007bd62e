// Helpers for GPU tests: how many devices this machine has, the skip every GPU case starts with, and a
// device buffer. GPU tests build wherever the CUDA toolkit exists and skip (GTEST_SKIP, counted as skipped,
// never as passed) with a message naming the GPUs they need and found.
#ifndef DISTLAB_TOOLS_TESTING_GPU_H_
#define DISTLAB_TOOLS_TESTING_GPU_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace distlab::testing {

// CUDA devices visible to this process; 0 when cudaGetDeviceCount fails (no driver, no device), with its
// error in *why (" (cudaGetDeviceCount: ...)").
int GpuCount(std::string* why = nullptr);

// "" when `needed` GPUs are there; otherwise "needs N GPU(s), found K (...)".
std::string GpuSkipReason(int needed);

// Ranks a multi-GPU test target runs with: DISTLAB_GPU_RANKS (set by the gpu_test macro), default 1.
int GpuRanks();

// The first statement of every GPU case.
#define DISTLAB_REQUIRE_GPUS(n)                                                 \
  do {                                                                          \
    const std::string distlab_gpu_skip_ = ::distlab::testing::GpuSkipReason(n); \
    if (!distlab_gpu_skip_.empty()) GTEST_SKIP() << distlab_gpu_skip_;          \
  } while (0)

// cudaMalloc'd memory on one device (never managed memory), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  // The allocation's result (a CUDA error names the call).
  const absl::Status& status() const { return status_; }

  // Synchronous copies of the first `bytes` bytes (default: all).
  absl::Status Upload(const void* host, size_t bytes);
  absl::Status Download(void* host, size_t bytes) const;
  template <typename T>
  absl::Status Upload(const std::vector<T>& host) {
    return Upload(host.data(), host.size() * sizeof(T));
  }
  template <typename T>
  absl::Status Download(std::vector<T>& host) const {
    return Download(host.data(), host.size() * sizeof(T));
  }

 private:
  int device_;
  size_t bytes_;
  void* ptr_ = nullptr;
  absl::Status status_;
};

}  // namespace distlab::testing

#endif  // DISTLAB_TOOLS_TESTING_GPU_H_
