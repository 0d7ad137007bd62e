"""gpu_test: a test that needs CUDA devices (docs/design.md §2).

It builds wherever the CUDA toolkit is found (skipped as incompatible elsewhere), carries the tags `gpu`,
`exclusive` (never two at once on one machine) and `gpus=N`, plus `multi_gpu` when N > 1, and gets N in
DISTLAB_GPU_RANKS. Its cases start with DISTLAB_REQUIRE_GPUS (tools/testing/gpu.h), so on a machine with
fewer GPUs they skip with a message naming the GPUs needed and found. `bazel test --config=gpu` runs only
these, on the nccl backend (which //reference/comm holds in every configuration where CUDA is found).

Each also gets `<name>_fakegpu` (unless fake = False): the same binary on the simulated CUDA runtime and NCCL
of //reference/comm/fake_cuda, tagged `fake_gpu`, not `gpu`, so it runs in every ordinary `bazel test` where
the toolkit exists.
"""

load("//third_party/cuda:cuda.bzl", "cuda_compatible")

def gpu_tests(names, srcs, deps = [], tags = [], **kwargs):
    """One gpu_test per entry of `names` (GPU count -> test name), all on one compiled copy of `srcs`: the
    sources are built once into `<first name>_lib`, which every variant links."""
    counts = sorted(names.keys())
    lib = names[counts[0]] + "_lib"
    native.cc_library(
        name = lib,
        srcs = srcs,
        deps = [
            "//tools/testing:test_support",
            "//tools/testing:gpu",
            "//third_party:gtest",
            "//third_party:gmock",
        ] + deps,
        alwayslink = True,
        testonly = True,
        target_compatible_with = cuda_compatible(),
    )
    for gpus in counts:
        gpu_test(name = names[gpus], srcs = [], deps = [":" + lib], gpus = gpus, tags = tags, **kwargs)

def gpu_test(name, srcs, deps = [], gpus = 1, tags = [], timeout_s = 120, size = "medium", env = {},
             fake = True):
    """See the file's docstring. fake: also `<name>_fakegpu`, the same binary on the simulated CUDA runtime
    and NCCL of //reference/comm/fake_cuda (for tests that use no CUDA kernels or cuBLAS)."""
    all_tags = ["gpu", "exclusive", "gpus=%d" % gpus] + (["multi_gpu"] if gpus > 1 else []) + tags
    test_env = {"DISTLAB_CASE_TIMEOUT_S": str(timeout_s), "DISTLAB_GPU_RANKS": str(gpus)}
    test_env.update(env)
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = [
            "//tools/testing:test_support",
            "//tools/testing:gpu",
            "//tools/testing:gtest_main",
            "//third_party:gtest",
            "//third_party:gmock",
        ] + deps,
        size = size,
        tags = all_tags,
        env = test_env,
        linkstatic = True,
        target_compatible_with = cuda_compatible(),
    )
    if fake:
        _fake_variant(name + "_fakegpu", ":" + name, gpus, tags = [t for t in tags if t != "public"],
                      timeout_s = timeout_s)

def _fake_variant(name, test, gpus, tags, timeout_s):
    """`test` on the simulated CUDA runtime and NCCL (//reference/comm/fake_cuda), with `gpus` simulated GPUs."""
    fake = "//reference/comm/fake_cuda:libcudart.so.13"
    native.sh_test(
        name = name,
        srcs = ["//tools/testing:run_variant.sh"],
        args = ["$(rootpath %s)" % test, "--fake=$(rootpath %s)" % fake],
        data = [test, fake, "//reference/comm/fake_cuda:libnccl.so.2"],
        env = {
            "DISTLAB_TEST_BACKEND": "nccl",
            "DISTLAB_GPU_RANKS": str(gpus),
            "DISTLAB_FAKE_GPUS": str(gpus),
            "DISTLAB_CASE_TIMEOUT_S": str(timeout_s),
        },
        tags = ["fake_gpu"] + tags,
        size = "medium",
        target_compatible_with = cuda_compatible(),
    )

def gpu_variant(name, test, gpus, tags = [], timeout_s = 120):
    """`test` (a lab test binary linked with //reference/comm:test_backend) run again on the nccl backend.

    `<name>_gpu` runs the same binary with DISTLAB_TEST_BACKEND=nccl: every communicator the cases make with
    default options is on the nccl backend, staging their host tensors through device memory (comm.h:
    CommOptions::host_staging). `gpus` is the most ranks any of its cases uses (one per GPU); on a machine with
    fewer, the cases that need more ranks than there are GPUs skip naming the GPUs needed and found (see
    reference/comm/test_backend.cc). It costs no link: the binary is the test's own.

    `<name>_fakegpu` runs it the same way on the simulated CUDA runtime and NCCL of
    //reference/comm/fake_cuda (host memory, calls that finish before they return), everywhere the toolkit
    exists: CI checks the nccl backend's logic and the labs' use of it without a GPU.
    """
    _fake_variant(name + "_fakegpu", test, gpus, tags = tags, timeout_s = timeout_s)
    native.sh_test(
        name = name + "_gpu",
        srcs = ["//tools/testing:run_variant.sh"],
        args = ["$(rootpath %s)" % test],
        data = [test],
        env = {
            "DISTLAB_TEST_BACKEND": "nccl",
            "DISTLAB_GPU_RANKS": str(gpus),
            "DISTLAB_CASE_TIMEOUT_S": str(timeout_s),
        },
        tags = ["gpu", "exclusive", "gpus=%d" % gpus, "variant"] + (["multi_gpu"] if gpus > 1 else []) + tags,
        size = "medium",
        target_compatible_with = cuda_compatible(),
    )
