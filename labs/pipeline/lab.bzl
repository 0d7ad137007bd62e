"""Lab 5 (pipeline): the graded surface, declared once (see tools/build_defs/lab.bzl)."""

LAB = struct(
    name = "pipeline",
    hdrs = [
        "schedule.h",
        "zero_bubble.h",
        "simulator.h",
        "figures.h",
        "executor.h",
    ],
    # Student-editable files, one per stage group.
    srcs = [
        "schedule.cc",     # stage A: validator, GPipe, 1F1B, closed forms
        "simulator.cc",    # stage A: event simulator
        "zero_bubble.cc",  # stage B: ZB-H1, ZB-H2, Table 2, greedy
        "executor.cc",     # stage C: the executor on p ranks
        "figures.cc",      # stage D: timeline figures
    ],
    deps = [
        "//reference/base",
        "//reference/comm",
        "//reference/nn",
        "//reference/tensor",
        "//reference/viz",
        "//third_party:absl",
    ],
    # The public tests of labs/pipeline/BUILD and the pieces each exercises (the one it is named after first):
    # the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "schedule_test": ["schedule", "simulator"],
        "zero_bubble_test": ["zero_bubble", "simulator"],
        "figures_test": ["figures"],
        "executor_test": ["executor"],
        "executor_trace_test": ["executor"],
    },
)
