#!/usr/bin/env bash
# Checks test_backend.cc's per-case mode on the simulated GPUs of //reference/comm/fake_cuda: runs the lab test
# binary $1 with DISTLAB_TEST_BACKEND=nccl, DISTLAB_GPU_RANKS=$3 and only $4 simulated GPUs ($2: the simulated
# libcudart), and expects every case reported -- those that asked for more ranks than GPUs as skipped, naming
# the GPUs needed and found, the others passed -- and none failed.
set -euo pipefail
binary="$1" fake="$2" ranks="$3" gpus="$4"
xml="${TEST_TMPDIR:-$(mktemp -d)}/per_case.xml"
log="${TEST_TMPDIR:-$(mktemp -d)}/per_case.log"
rc=0
XML_OUTPUT_FILE="$xml" LD_LIBRARY_PATH="$(cd "$(dirname "$fake")" && pwd)" DISTLAB_TEST_BACKEND=nccl \
  DISTLAB_GPU_RANKS="$ranks" DISTLAB_FAKE_GPUS="$gpus" "$binary" >"$log" 2>&1 || rc=$?
# (Without XML_OUTPUT_FILE: GoogleTest would write the case list into this check's own XML, as passed cases.)
cases=$(env -u XML_OUTPUT_FILE -u GTEST_OUTPUT "$binary" --gtest_list_tests | grep -c '^  ' || true)
skipped=$(grep -c 'result="skipped"' "$xml" || true)
completed=$(grep -c 'result="completed"' "$xml" || true)
failures=$(grep -c '<failure' "$xml" || true)
named=$(grep -c "needs [0-9]* GPUs (one rank per GPU on the nccl backend), found $gpus" "$xml" || true)
echo "exit $rc; $cases cases: $completed completed ($failures failed), $skipped skipped ($named naming the GPUs)"
ok=1
((rc == 0)) || { echo "FAIL: exit status $rc"; ok=0; }
((completed + skipped == cases)) || { echo "FAIL: $((completed + skipped)) of $cases cases reported"; ok=0; }
((failures == 0)) || { echo "FAIL: $failures cases failed"; ok=0; }
((skipped > 0 && named == skipped)) || { echo "FAIL: expected skips naming 'found $gpus', got $named of $skipped"; ok=0; }
((completed - failures > 0)) || { echo "FAIL: no case ran with $gpus GPUs"; ok=0; }
((ok)) || { tail -40 "$log"; exit 1; }
echo "per-case mode: OK"
