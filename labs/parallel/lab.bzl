"""Lab 4 (parallel): data, tensor and fully-sharded parallelism; memory and communication accounting."""

LAB = struct(
    name = "parallel",
    hdrs = [
        "data_parallel.h",
        "memory_model.h",
        "tensor_parallel.h",
        "zero.h",
    ],
    srcs = [
        "data_parallel.cc",
        "memory_model.cc",
        "tensor_parallel.cc",
        "zero.cc",
    ],
    deps = [
        "//reference/base",
        "//reference/comm",
        "//reference/nn",
        "//reference/tensor",
        "//third_party:absl",
    ],
    # The public tests of labs/parallel/BUILD and the pieces each exercises (the one it is named after first):
    # the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "data_parallel_test": ["data_parallel"],
        "data_parallel_trace_test": ["data_parallel"],
        "tensor_parallel_test": ["tensor_parallel"],
        "zero_test": ["zero"],
        "zero_trace_test": ["zero"],
        "memory_model_test": ["memory_model"],
    },
)
