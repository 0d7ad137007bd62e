// A simulated CUDA runtime for machines without GPUs: the functions the nccl backend loads (reference/comm/
// cuda_dl.h) and nothing more. "Devices" are DISTLAB_FAKE_GPUS (default 8) labels; device memory is host
// memory from malloc that this library remembers, so cudaPointerGetAttributes tells it from host memory as
// the real runtime does; copies are memcpy; streams and events are markers whose work is always finished,
// because the simulated NCCL (fake_nccl.cc) finishes every call before it returns. It exists so CI can run
// the nccl backend's logic; it says nothing about real GPUs.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

struct CUstream_st {
  int device;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when;
  bool recorded;
};

namespace {

struct Block {
  size_t bytes;
  int device;
};

std::mutex mu;
std::map<const char*, Block>& Blocks() {
  static auto* blocks = new std::map<const char*, Block>();
  return *blocks;
}

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

int Devices() {
  const char* env = std::getenv("DISTLAB_FAKE_GPUS");
  const int n = env ? std::atoi(env) : 8;
  return n >= 0 ? n : 0;
}

cudaError_t Err(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

cudaError_t Allocate(void** ptr, size_t bytes) {
  if (ptr == nullptr) return Err(cudaErrorInvalidValue);
  char* p = static_cast<char*>(std::malloc(bytes == 0 ? 1 : bytes));
  if (p == nullptr) return Err(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(mu);
  Blocks()[p] = Block{bytes, current_device};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t Release(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(mu);
  auto it = Blocks().find(static_cast<const char*>(ptr));
  if (it == Blocks().end()) return Err(cudaErrorInvalidValue);
  Blocks().erase(it);
  std::free(ptr);
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error (simulated CUDA runtime)";
    case cudaErrorInvalidValue:
      return "invalid argument (simulated CUDA runtime)";
    case cudaErrorMemoryAllocation:
      return "out of memory (simulated CUDA runtime)";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal (simulated CUDA runtime)";
    default:
      return "unknown error (simulated CUDA runtime)";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = Devices();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= Devices()) return Err(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return Allocate(ptr, bytes); }
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t) { return Allocate(ptr, bytes); }
cudaError_t cudaFree(void* ptr) { return Release(ptr); }
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return Release(ptr); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) return Err(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  std::memset(attr, 0, sizeof(*attr));
  attr->type = cudaMemoryTypeUnregistered;
  attr->device = -2;
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(mu);
  auto it = Blocks().upper_bound(p);
  if (it != Blocks().begin()) {
    --it;
    if (p < it->first + (it->second.bytes == 0 ? 1 : it->second.bytes)) {
      attr->type = cudaMemoryTypeDevice;
      attr->device = it->second.device;
      attr->devicePointer = const_cast<char*>(p);
    }
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = new CUstream_st{current_device};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st{std::chrono::steady_clock::now(), false};
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start->recorded || !end->recorded) return Err(cudaErrorInvalidValue);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

}  // extern "C"
