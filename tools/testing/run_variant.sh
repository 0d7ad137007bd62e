#!/usr/bin/env bash
# A GPU variant of a lab test (tools/build_defs/gpu.bzl: gpu_variant): runs the test binary given as the first
# argument, with the environment the variant sets (DISTLAB_TEST_BACKEND=nccl, DISTLAB_GPU_RANKS). Bazel's
# XML_OUTPUT_FILE passes through, so the per-case results are the binary's own.
set -euo pipefail
binary="$1"
shift
exec "$binary" "$@"
