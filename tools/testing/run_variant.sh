#!/usr/bin/env bash
# A variant of a lab test (tools/build_defs/gpu.bzl: gpu_variant): runs the test binary given as the first
# argument, with the environment the variant sets (DISTLAB_TEST_BACKEND=nccl, DISTLAB_GPU_RANKS), passing on
# the arguments after it. `--fake=LIB` (a library of //reference/comm/fake_cuda) puts LIB's folder first on
# LD_LIBRARY_PATH, so the nccl backend loads the simulated CUDA runtime and NCCL. Bazel's XML_OUTPUT_FILE
# passes through, so the per-case results are the binary's own.
set -euo pipefail
binary="$1"
shift
if [[ "${1:-}" == --fake=* ]]; then
  fake_dir="$(cd "$(dirname "${1#--fake=}")" && pwd)"
  export LD_LIBRARY_PATH="$fake_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  shift
fi
exec "$binary" "$@"
