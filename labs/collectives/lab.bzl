"""Lab 1 (collectives): the interface headers, the student-editable files and what they build against."""

LAB = struct(
    name = "collectives",
    hdrs = [
        "bandwidth.h",
        "halving_doubling.h",
        "harness.h",
        "lifecycle.h",
        "ring.h",
    ],
    # Student-editable (the grader takes only these): stage A lifecycle.cc; stage B ring.cc; stage C
    # bandwidth.cc and harness.cc; stage D (stretch) halving_doubling.cc.
    srcs = [
        "bandwidth.cc",
        "halving_doubling.cc",
        "harness.cc",
        "lifecycle.cc",
        "ring.cc",
    ],
    deps = [
        "//reference/base",
        "//reference/comm",
        "//third_party:absl",
    ],
    # The public tests of labs/collectives/BUILD and the pieces each exercises (the one it is named after first):
    # the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "lifecycle_test": ["lifecycle"],
        "ring_test": ["ring"],
        "bandwidth_test": ["bandwidth", "harness"],
        "halving_doubling_test": ["halving_doubling"],
    },
)
