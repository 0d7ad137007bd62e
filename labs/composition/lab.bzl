"""Lab 7 (composition): the capstone -- a small GPT on a dp x pp x tp rank grid (see tools/build_defs/lab.bzl)."""

LAB = struct(
    name = "composition",
    hdrs = [
        "grid.h",
        "tp_block.h",
        "ledger.h",
        "train3d.h",
        "fsdp_pipeline.h",
        "planner.h",
        "sp_block.h",
    ],
    # Student-editable files, one per piece.
    srcs = [
        "grid.cc",      # stage A: the rank grid
        "tp_block.cc",  # stage B: the tensor-parallel GPT block
        "train3d.cc",  # stage C: 3D training (1F1B x TP x ZeRO-1)
        "fsdp_pipeline.cc",  # stage D: ZeRO-3 inside pipeline stages
        "planner.cc",  # stage E: the cost model and the planner
        "sp_block.cc",  # stage F (stretch): sequence parallelism
    ],
    deps = [
        "//reference/base",
        "//reference/comm",
        "//reference/nn",
        "//reference/tensor",
        "//third_party:absl",
        # The earlier labs' files this lab builds on (see `prior`): Lab 4's shards and f/g, Lab 5's 1F1B.
        "//labs/parallel:impl",
        "//labs/pipeline:impl",
    ],
    # The student's own files of earlier labs that this lab links: `labctl grade` takes them from the
    # submission too (notes/07-composition.md, "What you reuse").
    prior = {
        "parallel": ["tensor_parallel.cc", "zero.cc"],
        "pipeline": ["schedule.cc"],
    },
    # The public tests of labs/composition/BUILD and the pieces each exercises (the one it is named after
    # first): the gates link each with the mutants of its pieces (gate 4; see tools/build_defs/lab.bzl).
    public_tests = {
        "grid_test": ["grid"],
        "tp_block_test": ["tp_block"],
        "train3d_test": ["train3d", "tp_block"],
        "fsdp_pipeline_test": ["fsdp_pipeline", "train3d"],
        "planner_test": ["planner"],
        "sp_block_test": ["sp_block"],
    },
)
