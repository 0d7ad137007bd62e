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
    # The public tests of labs/moe/BUILD and the pieces each exercises (the one it is named after first):
    # the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "moe_layer_test": ["moe_layer"],
        "balance_test": ["balance"],
        # ExpertCapacity (moe_layer.cc, stage C) is tested beside the expert-parallel layer.
        "expert_parallel_test": ["expert_parallel", "moe_layer"],
        "routing_stats_test": ["routing_stats"],
    },
)
