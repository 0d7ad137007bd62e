// Loads the CUDA runtime and NCCL for the nccl backend (see cuda_dl.h): soname first, then the toolkit folder
// found at configure time. Nothing is ever unloaded (the libraries keep threads and device state).
#include "reference/comm/cuda_dl.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "third_party/cuda/distlab_cuda_dl_config.h"

namespace distlab::comm::cuda_dl {
namespace {

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlerror";
}

// Opens `soname` as the dynamic loader finds it, else from the toolkit folder; the error names both tries.
absl::StatusOr<void*> Open(const char* soname) {
  if (void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return lib;
  const std::string by_soname = DlError();
  const std::string path = absl::StrCat(DISTLAB_CUDA_LIB_DIR, "/", soname);
  if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  return absl::FailedPreconditionError(
      absl::StrCat("nccl backend: cannot load ", soname, ": ", by_soname, "; ", DlError(),
                   " (put the folder of this machine's CUDA runtime and NCCL on LD_LIBRARY_PATH)"));
}

template <typename F>
absl::Status Resolve(void* lib, const char* soname, const char* name, F* fn) {
  dlerror();
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("nccl backend: ", soname, " has no ", name, ": ",
                                                      DlError(),
                                                      " (a library older than the "
                                                      "toolkit this was built with?)"));
  }
  return absl::OkStatus();
}

// The symbol of f after macro expansion (the name a direct call would link to).
#define DISTLAB_CUDA_DL_NAME(f) DISTLAB_CUDA_DL_STR(f)
#define DISTLAB_CUDA_DL_STR(f) #f

absl::Status LoadInto(Api& api) {
  auto cudart = Open(DISTLAB_CUDART_SONAME);
  if (!cudart.ok()) return cudart.status();
  auto nccl = Open(DISTLAB_NCCL_SONAME);
  if (!nccl.ok()) return nccl.status();
  absl::Status status;
#define DISTLAB_CUDA_DL_CUDART(f) \
  if (status.ok()) status = Resolve(*cudart, DISTLAB_CUDART_SONAME, DISTLAB_CUDA_DL_NAME(f), &api.f);
#define DISTLAB_CUDA_DL_NCCL(f) \
  if (status.ok()) status = Resolve(*nccl, DISTLAB_NCCL_SONAME, DISTLAB_CUDA_DL_NAME(f), &api.f);
  DISTLAB_CUDART_FUNCTIONS(DISTLAB_CUDA_DL_CUDART)
  DISTLAB_CUDA_DL_CUDART(cudaMalloc)
  DISTLAB_CUDA_DL_CUDART(cudaMallocAsync)
  DISTLAB_CUDA_DL_CUDART(cudaEventCreate)
  DISTLAB_NCCL_FUNCTIONS(DISTLAB_CUDA_DL_NCCL)
#undef DISTLAB_CUDA_DL_CUDART
#undef DISTLAB_CUDA_DL_NCCL
  return status;
}

struct Loading {
  Api api;
  absl::Status status;
};

const Loading& Once() {
  static const Loading* loading = [] {
    auto* l = new Loading();
    l->status = LoadInto(l->api);
    return l;
  }();
  return *loading;
}

}  // namespace

absl::StatusOr<const Api*> Load() {
  const Loading& l = Once();
  if (!l.status.ok()) return l.status;
  return &l.api;
}

const Api& Loaded() {
  const Loading& l = Once();
  if (!l.status.ok()) {
    std::fprintf(stderr, "cuda_dl: a CUDA or NCCL call without a loaded library: %s\n",
                 std::string(l.status.message()).c_str());
    std::abort();
  }
  return l.api;
}

}  // namespace distlab::comm::cuda_dl
