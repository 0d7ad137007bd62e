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
)
