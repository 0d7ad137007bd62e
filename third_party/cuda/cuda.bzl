"""Macros for GPU targets: they build wherever the CUDA toolkit is found and are skipped elsewhere.

cuda_library compiles .cu files with nvcc for sm_80 and sm_90 into an object file that a cc_library links.
"""

load("@local_cuda//:defs.bzl", "CUDA_FOUND", "CUDA_ROOT")

CUDA_FOUND_ = CUDA_FOUND

def cuda_compatible():
    """target_compatible_with for GPU targets: empty when CUDA is found, never satisfied otherwise."""
    return [] if CUDA_FOUND else ["//third_party/cuda:toolkit_missing"]

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc (sm_80 and sm_90, -O2, C++17)."""
    objs = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_library srcs must be .cu files: " + src)
        obj = name + "_" + src.replace("/", "_")[:-3] + ".o"
        native.genrule(
            name = name + "_" + src.replace("/", "_")[:-3] + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            # nvcc finds its own headers relative to its real location, so it runs from the toolkit.
            cmd = (CUDA_ROOT + "/bin/nvcc -std=c++17 -O2 -Xcompiler -fPIC -I. " +
                   "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 " +
                   " ".join(copts) + " -c $(location " + src + ") -o $@"),
            target_compatible_with = cuda_compatible(),
            tags = ["gpu_build"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        target_compatible_with = cuda_compatible(),
        **kwargs
    )
