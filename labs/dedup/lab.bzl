"""Lab 3 (dedup): the interface headers and the student-editable files."""

LAB = struct(
    name = "dedup",
    hdrs = [
        "shingle.h",
        "minhash.h",
        "lsh.h",
        "cluster.h",
        "corpus_io.h",
        "across_ranks.h",
    ],
    srcs = [
        "shingle.cc",
        "minhash.cc",
        "lsh.cc",
        "cluster.cc",
        "corpus_io.cc",
        "across_ranks.cc",
    ],
    deps = [
        "//reference/base",
        "//reference/comm",
        "//third_party:absl",
        "//third_party:icu",
        "//third_party:xxhash",
        "//third_party:json",
    ],
    # The public tests of labs/dedup/BUILD and the pieces each exercises (the one it is named after first):
    # the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "shingle_test": ["shingle"],
        "minhash_test": ["minhash"],
        "lsh_test": ["lsh"],
        "cluster_test": ["cluster", "lsh"],
        "corpus_io_test": ["corpus_io"],
        "across_ranks_test": ["across_ranks"],
    },
    # The grader's symbol rules (tools/build_defs/grading.bzl): what student objects may reference beyond the
    # stubs, the solution and the default margin (the C++ and C libraries, libm, Abseil, the runtime).
    symbol_margin = ["@files", "XXH*", "icu_*::*", "u_*", "nlohmann::*"],
)
