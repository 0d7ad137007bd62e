"""Lab 6 (moe): the router and the MoE layer, the load-balancing loss at micro vs global batch, capacity and
expert-parallel all-to-all, the specialization experiment."""

LAB = struct(
    name = "moe",
    hdrs = [
        "balance.h",
        "expert_parallel.h",
        "moe_layer.h",
        "routing_stats.h",
    ],
    srcs = [
        "balance.cc",
        "expert_parallel.cc",
        "moe_layer.cc",
        "routing_stats.cc",
    ],
    deps = [
        "//reference/base",
        "//reference/comm",
        "//reference/nn",
        "//reference/tensor",
        "//third_party:absl",
    ],
)
