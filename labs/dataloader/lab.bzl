"""Lab 2 (dataloader): the one declaration of its interface and student files (see tools/build_defs/lab.bzl)."""

LAB = struct(
    name = "dataloader",
    hdrs = [
        "dataset.h",
        "sampler.h",
        "loader.h",
        "worker.h",
        "indexed_dataset.h",
        "gpt_dataset.h",
        "state.h",
    ],
    srcs = [
        "sampler.cc",  # stage A: samplers and collate
        "loader.cc",  # stage B: the multi-process loader (and the parts of stage C that live in it)
        "worker.cc",  # stage C: forking a worker, reading its exit, the resource tracker
        "indexed_dataset.cc",  # stage D: the .bin/.idx writer and reader
        "gpt_dataset.cc",  # stage D: GPT samples and blending
        "state.cc",  # stage E: the loader's checkpoint, seeding, grid sharding, Megatron's consumed samples
    ],
    deps = [
        "//reference/base",
        "//reference/trace",
        "//third_party:absl",
        "//third_party:xxhash",
    ],
    # The public tests of labs/dataloader/BUILD and the pieces each exercises (the one it is named after first):
    # the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "sampler_test": ["sampler"],
        "loader_test": ["loader"],
        "worker_test": ["worker", "loader"],
        "indexed_dataset_test": ["indexed_dataset", "gpt_dataset"],
        "state_test": ["state", "loader", "sampler"],
        "loader_trace_test": ["loader"],
    },
    # The grader's symbol rules (tools/build_defs/grading.bzl): what student objects may reference beyond the
    # stubs, the solution and the default margin (the C++ and C libraries, libm, Abseil, the runtime).
    symbol_margin = ["@files", "@processes", "XXH*"],
)
