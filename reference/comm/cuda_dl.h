// The CUDA runtime and NCCL, loaded with dlopen the first time the nccl backend is used.
//
// //reference/comm holds the nccl backend wherever the CUDA toolkit was found when the build was configured,
// in every configuration, yet a binary that links it must start (and run the threads and gloo backends) on a
// machine without libcudart or libnccl, and must not pay for loading them. So the nccl backend and the
// benchmark call every CUDA runtime and NCCL function through the table below, filled by dlsym on first use.
//
// Each library is opened by its soname first (libcudart.so.<major>, libnccl.so.2), so that LD_LIBRARY_PATH
// and the ld cache of the machine decide which copy runs, and a binary that also links libcudart directly
// (the GPU tests, through //tools/testing:gpu) gets the copy already loaded: one CUDA runtime per process.
// Only if that fails is the library opened from the toolkit folder found at configure time
// (@local_cuda//:dl_config).
//
// The function types come from the toolkit's headers (decltype of the declarations), so a call through the
// table is checked exactly like a direct call. Default arguments do not survive a function pointer: pass
// every argument (cudaEventRecord(e, 0), not cudaEventRecord(e)).
#ifndef DISTLAB_REFERENCE_COMM_CUDA_DL_H_
#define DISTLAB_REFERENCE_COMM_CUDA_DL_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/statusor.h"

namespace distlab::comm::cuda_dl {

// The functions resolved in libcudart. (Names go through the preprocessor first, as in a direct call, so a
// function the runtime header renames, e.g. to a _v2 or per-thread-stream symbol, is looked up by that name.)
#define DISTLAB_CUDART_FUNCTIONS(X) \
  X(cudaGetLastError)               \
  X(cudaGetErrorName)               \
  X(cudaGetErrorString)             \
  X(cudaGetDeviceCount)             \
  X(cudaSetDevice)                  \
  X(cudaFree)                       \
  X(cudaFreeAsync)                  \
  X(cudaMemcpy)                     \
  X(cudaMemcpyAsync)                \
  X(cudaPointerGetAttributes)       \
  X(cudaStreamCreateWithFlags)      \
  X(cudaStreamDestroy)              \
  X(cudaStreamQuery)                \
  X(cudaEventRecord)                \
  X(cudaEventQuery)                 \
  X(cudaEventSynchronize)           \
  X(cudaEventElapsedTime)           \
  X(cudaEventDestroy)

// The functions resolved in libnccl.
#define DISTLAB_NCCL_FUNCTIONS(X) \
  X(ncclGetErrorString)           \
  X(ncclGetLastError)             \
  X(ncclGetUniqueId)              \
  X(ncclCommInitAll)              \
  X(ncclCommInitRankConfig)       \
  X(ncclCommSplit)                \
  X(ncclCommUserRank)             \
  X(ncclCommCount)                \
  X(ncclCommGetAsyncError)        \
  X(ncclCommFinalize)             \
  X(ncclCommDestroy)              \
  X(ncclCommAbort)                \
  X(ncclGroupStart)               \
  X(ncclGroupEnd)                 \
  X(ncclAllReduce)                \
  X(ncclBroadcast)                \
  X(ncclReduce)                   \
  X(ncclAllGather)                \
  X(ncclReduceScatter)            \
  X(ncclAlltoAll)                 \
  X(ncclSend)                     \
  X(ncclRecv)

struct Api {
#define DISTLAB_CUDA_DL_MEMBER(f) decltype(&::f) f = nullptr;
  DISTLAB_CUDART_FUNCTIONS(DISTLAB_CUDA_DL_MEMBER)
  DISTLAB_NCCL_FUNCTIONS(DISTLAB_CUDA_DL_MEMBER)
#undef DISTLAB_CUDA_DL_MEMBER
  // Overloaded for C++ in cuda_runtime.h (a template; a variant with flags), so decltype cannot pick one:
  // the C functions' types, spelled out.
  cudaError_t (*cudaMalloc)(void** ptr, size_t bytes) = nullptr;
  cudaError_t (*cudaMallocAsync)(void** ptr, size_t bytes, cudaStream_t stream) = nullptr;
  cudaError_t (*cudaEventCreate)(cudaEvent_t* event) = nullptr;
};

// Loads libcudart and libnccl and resolves every function, once per process (thread-safe; later calls return
// the first outcome). FAILED_PRECONDITION naming the library or function and dlerror() when that fails, e.g.
// "nccl backend: cannot load libnccl.so.2: libnccl.so.2: cannot open shared object file ...".
absl::StatusOr<const Api*> Load();

// The table, once Load() succeeded (every caller reaches here only through a successful Load: a communicator
// of the nccl backend exists, or the caller checked). Aborts naming the load error otherwise.
const Api& Loaded();

}  // namespace distlab::comm::cuda_dl

#endif  // DISTLAB_REFERENCE_COMM_CUDA_DL_H_
