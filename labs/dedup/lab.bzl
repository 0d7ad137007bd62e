"""Lab 3 (dedup): the interface headers and the student-editable files."""

LAB = struct(
    name = "dedup",
    hdrs = [
        "shingle.h",
        "minhash.h",
        "lsh.h",
        "cluster.h",
        "corpus_io.h",
    ],
    srcs = [
        "shingle.cc",
        "minhash.cc",
        "lsh.cc",
        "cluster.cc",
        "corpus_io.cc",
    ],
    deps = [
        "//reference/base",
        "//third_party:absl",
        "//third_party:icu",
        "//third_party:xxhash",
        "//third_party:json",
    ],
)
