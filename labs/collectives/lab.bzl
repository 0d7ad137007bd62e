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
)
