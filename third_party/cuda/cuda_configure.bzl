"""Detects the CUDA toolkit (nvcc, cudart, cuBLAS, NCCL) and exposes it as @local_cuda.

Looks at $CUDA_PATH, then /usr/local/cuda. When nvcc and nccl.h are found, @local_cuda holds symlinks to the
toolkit's include and lib64 folders and `defs.bzl` says CUDA_FOUND = True; otherwise its targets are empty and
GPU targets are skipped (see cuda.bzl).
"""

_BUILD_FOUND = """
package(default_visibility = ["//visibility:public"])

exports_files(["nvcc"])

filegroup(name = "nvcc_files", srcs = ["nvcc"])

cc_library(
    name = "headers",
    hdrs = glob(["include/**"], allow_empty = True),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart"],
    deps = [":headers"],
)

cc_library(
    name = "cublas",
    linkopts = ["-L{lib}", "-lcublas", "-lcublasLt"],
    deps = [":cudart"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{lib}", "-lnccl"],
    deps = [":cudart"],
)
"""

_BUILD_MISSING = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "headers")
cc_library(name = "cudart")
cc_library(name = "cublas")
cc_library(name = "nccl")
filegroup(name = "nvcc_files", srcs = [])
"""

def _cuda_configure_impl(rctx):
    root = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = rctx.path(root + "/bin/nvcc")
    nccl_h = rctx.path(root + "/include/nccl.h")
    found = nvcc.exists and nccl_h.exists and rctx.os.environ.get("DISTLAB_NO_CUDA", "") == ""
    if found:
        lib = str(rctx.path(root + "/lib64").realpath)
        rctx.symlink(root + "/include", "include")
        rctx.symlink(nvcc, "nvcc")
        rctx.file("BUILD", _BUILD_FOUND.format(lib = lib))
        rctx.file("defs.bzl", "CUDA_FOUND = True\nCUDA_ROOT = %r\n" % str(rctx.path(root).realpath))
    else:
        rctx.file("BUILD", _BUILD_MISSING)
        rctx.file("defs.bzl", "CUDA_FOUND = False\nCUDA_ROOT = ''\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "DISTLAB_NO_CUDA"],
    local = True,
)
