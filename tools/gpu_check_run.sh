#!/usr/bin/env bash
# run.sh of a GPU-check pack (made by `tools/gpu_check.sh pack OUT`): runs on a GPU machine that has the CUDA
# driver and toolkit (CUDA 13 runtime, cuBLAS, NCCL 2) but no Bazel and no network. Installs nothing.
#
#   1. finds this machine's libcudart.so.13, libcublas.so.13, libcublasLt.so.13 and libnccl.so.2
#      ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, ldconfig, pip's nvidia/* wheels) and puts their folders on
#      LD_LIBRARY_PATH: the binaries link the first three, and the nccl backend dlopens libcudart.so.13 and
#      libnccl.so.2 by soname, which the loader looks up there first;
#   2. prints nvidia-smi;
#   3. runs every GPU test whose rank count fits the GPUs found (tests.txt: label, GPUs, binary), and every
#      lab test's GPU variant (*_gpu: with fewer GPUs it runs the cases that fit), each under a time limit,
#      and counts its cases from gtest's summary;
#   4. runs the AllReduce benchmark on the nccl backend (64 MiB f32 sum: algbw, busbw and the device memcpy
#      bandwidth beside it), the same benchmark on the threads backend at 2, 4 and 8 ranks on this machine's
#      CPU cores (paired_ratio beside paired_ratio_n_threads, notes/01-collectives.md §6: a GPU host has more
#      cores and faster memory than most build machines), and the cuBLAS GEMM throughput;
#   5. ends with ONE summary line: "gpu_check: ..." (exit status 0 only when nothing failed).
# Environment: GPU_CHECK_TEST_TIMEOUT_S (default 240) per test binary, GPU_CHECK_BENCH_MIN_TIME (default 0.5).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
T0=$SECONDS
TEST_TIMEOUT="${GPU_CHECK_TEST_TIMEOUT_S:-240}"
BENCH_MIN_TIME="${GPU_CHECK_BENCH_MIN_TIME:-0.5}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"

hr() { printf '%*s\n' 100 '' | tr ' ' '-'; }
summary() {  # the one summary line, then exit
  echo "gpu_check: $* ($((SECONDS - T0)) s; logs in $LOGS)"
}

# --- 1. this machine's CUDA libraries ---
NEEDED=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)
declare -A FOUND=()
search_dirs=()
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-13* /opt/cuda; do
  [[ -n "$d" && -d "$d" ]] || continue
  search_dirs+=("$d/lib64" "$d/lib" "$d/targets/x86_64-linux/lib" "$d/targets/sbsa-linux/lib")
done
search_dirs+=(/usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib)
for py in /usr/local/lib/python3*/dist-packages /usr/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
          "$HOME"/.local/lib/python3*/site-packages /opt/conda/lib/python3*/site-packages /opt/conda/lib; do
  [[ -d "$py" ]] || continue
  for d in "$py"/nvidia/*/lib "$py"/nvidia/cu13/lib "$py"; do [[ -d "$d" ]] && search_dirs+=("$d"); done
done
for lib in "${NEEDED[@]}"; do
  for d in "${search_dirs[@]}"; do
    if [[ -e "$d/$lib" ]]; then FOUND[$lib]="$d"; break; fi
  done
  if [[ -z "${FOUND[$lib]:-}" ]] && command -v ldconfig >/dev/null; then
    p="$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')"
    [[ -n "$p" ]] && FOUND[$lib]="$(dirname "$p")"
  fi
done
LIBPATH="$HERE/lib"
# The pack stores its largest libraries gzipped (OpenBLAS alone is 36 MiB): unpacked into the log folder.
for gz in "$HERE"/lib/*.gz; do
  [[ -e "$gz" ]] || continue
  mkdir -p "$LOGS/lib"
  gzip -dc "$gz" >"$LOGS/lib/$(basename "$gz" .gz)"
  LIBPATH="$LOGS/lib:$HERE/lib"
done
missing=()
for lib in "${NEEDED[@]}"; do
  if [[ -n "${FOUND[$lib]:-}" ]]; then
    [[ ":$LIBPATH:" == *":${FOUND[$lib]}:"* ]] || LIBPATH="$LIBPATH:${FOUND[$lib]}"
  else
    missing+=("$lib")
  fi
done
echo "CUDA libraries of this machine:"
for lib in "${NEEDED[@]}"; do printf '  %-20s %s\n' "$lib" "${FOUND[$lib]:-NOT FOUND}"; done

# --- 2. the GPUs ---
hr
GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi 2>&1 || true
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
    visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c . || true)
    ((visible < GPUS)) && GPUS=$visible
  fi
  GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
else
  echo "nvidia-smi: not found (no NVIDIA driver on this machine)"
  GPU_NAME="none"
fi
hr
if ((GPUS == 0)); then
  summary "FAILED: no GPU found (nvidia-smi lists none or is missing); this pack must run on a machine with NVIDIA GPUs and a CUDA 13 driver"
  exit 1
fi
if ((${#missing[@]})); then
  summary "FAILED: $GPUS GPU(s) ($GPU_NAME) but missing ${missing[*]}: install the CUDA 13 toolkit (cuBLAS) and NCCL 2, or point CUDA_HOME at them"
  exit 1
fi
export LD_LIBRARY_PATH="$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The binaries were built against a recent libstdc++; use the packed one only if this machine's is older.
probe="$HERE/bin/$(awk 'NR == 1 {print $3}' "$HERE/tests.txt")"
if "$probe" --gtest_list_tests 2>&1 | grep -q "GLIBCXX\|CXXABI\|libstdc++"; then
  echo "this machine's libstdc++ is older than the build's: using the packed one (lib/compat)"
  export LD_LIBRARY_PATH="$HERE/lib/compat:$LD_LIBRARY_PATH"
fi
if ! out=$("$probe" --gtest_list_tests 2>&1); then
  echo "$out" | tail -5
  summary "FAILED: the packed binaries do not start here (see above: usually a glibc older than the build machine's)"
  exit 1
fi

# --- 3. the GPU tests ---
P=0; F=0; S=0; NOT_RUN=0; FAILED_TESTS=()
printf '%-52s %5s  %s\n' "test" "GPUs" "result"
hr
while read -r label need binary; do
  [[ -n "$label" ]] || continue
  # A lab test's GPU variant (label *_gpu) runs the cases that fit fewer GPUs (each in its own process; the
  # others skip naming the GPUs), so it runs anyway; the runtime's own multi-GPU tests would only skip.
  if ((need > GPUS)) && [[ "$label" != *_gpu ]]; then
    NOT_RUN=$((NOT_RUN + 1))
    printf '%-52s %5s  %s\n' "$label" "$need" "not run: needs $need GPUs, found $GPUS"
    continue
  fi
  log="$LOGS/$(tr '/:' '__' <<<"$label").log"
  # DISTLAB_TEST_BACKEND=nccl moves a lab test's default communicators to NCCL (reference/comm/test_backend.cc);
  # the runtime's own GPU tests ask for the nccl backend themselves and ignore it.
  DISTLAB_GPU_RANKS="$need" DISTLAB_CASE_TIMEOUT_S=$((TEST_TIMEOUT - 10)) DISTLAB_BACKEND=nccl DISTLAB_TEST_BACKEND=nccl \
    timeout "$TEST_TIMEOUT" "$HERE/bin/$binary" --gtest_color=no >"$log" 2>&1
  rc=$?
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1); p=${p:-0}
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1); f=${f:-0}
  s=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1); s=${s:-0}
  note=""
  if ((rc != 0 && f == 0)); then
    f=1
    if ((rc == 124)); then note=" (timed out after ${TEST_TIMEOUT}s)"; else note=" (exit status $rc)"; fi
  fi
  P=$((P + p)); F=$((F + f)); S=$((S + s))
  ((f > 0)) && FAILED_TESTS+=("$label")
  printf '%-52s %5s  %s\n' "$label" "$need" "$p passed, $f failed, $s skipped$note"
  if ((f > 0)); then grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -8 | sed 's/^/    /'; fi
done <"$HERE/tests.txt"
hr

# --- 4. benchmarks ---
ALLREDUCE="n/a"; MEMCPY="n/a"; GEMM="n/a"
blog="$LOGS/comm_bench.log"
filter="BM_NcclAllReduceF32Sum/(1"
for n in 2 4 8; do ((n <= GPUS)) && filter="$filter|$n"; done
filter="$filter)/"
echo "AllReduce, f32 sum, 64 MiB, nccl backend (compare: all_reduce_perf -b 64M -e 64M -g <n> of nccl-tests)"
bjson="$LOGS/comm_bench.json"
timeout 300 "$HERE/bin/comm_bench" --backend=nccl --benchmark_filter="$filter" \
  --benchmark_min_time="$BENCH_MIN_TIME" --benchmark_out="$bjson" --benchmark_out_format=json >"$blog" 2>&1
brc=$?
grep -vE '^\*\*\*WARNING' "$blog"
# A counter of one benchmark run in Google Benchmark's JSON output, printed with FORMAT:
# counter <json> <run name prefix> <counter> <format>
counter() {
  awk -v want="$2" -v key="\"$3\":" -v fmt="$4" '
    /"name":/ {cur = $0}
    index(cur, want) && index($0, key) {v = $0; sub(/.*: */, "", v); sub(/,.*/, "", v); printf fmt, v; exit}' "$1" 2>/dev/null
}
jget() { counter "$bjson" "BM_NcclAllReduceF32Sum/$1/" "$2" "%.1f"; }  # jget <ranks> <counter>
if ((brc == 0)) && [[ -n "$(jget 1 algbw_GBps)" ]]; then
  ALLREDUCE="$(jget 1 algbw_GBps) GB/s algbw on 1 rank"
  MEMCPY="$(jget 1 memcpy_GBps) GB/s"
  for n in 8 4 2; do
    if ((n <= GPUS)) && [[ -n "$(jget $n busbw_GBps)" ]]; then
      ALLREDUCE="$ALLREDUCE, busbw $(jget $n busbw_GBps) GB/s on $n ranks"
      break
    fi
  done
else
  F=$((F + 1)); FAILED_TESTS+=("comm_bench")
  why=$(grep -oE "ERROR OCCURRED: '[^']*'" "$blog" | head -1 | sed -e "s/ERROR OCCURRED: //" -e "s/'//g")
  ALLREDUCE="FAILED (exit $brc${why:+: $why})"
fi
hr
# The threads backend on this host's cores: a measurement, not a test (only a crash counts as a failure).
# paired_ratio = the AllReduce against a copy of its traffic on all cores; paired_ratio_n_threads = against
# the same copy on the AllReduce's own n threads. Near 1 for the second but low for the first: n threads
# cannot draw this machine's memory bandwidth; low for both: the AllReduce's loops lose it.
THREADS="n/a"
tlog="$LOGS/comm_bench_threads.log"
tjson="$LOGS/comm_bench_threads.json"
echo "AllReduce, f32 sum, 64 MiB, threads backend on $(nproc) CPU threads of this machine"
timeout 300 "$HERE/bin/comm_bench" --backend=threads --benchmark_filter='BM_AllReduceF32Sum/[248]/0' \
  --benchmark_out="$tjson" --benchmark_out_format=json >"$tlog" 2>&1
trc=$?
grep -vE '^\*\*\*WARNING' "$tlog"
tget() { counter "$tjson" "BM_AllReduceF32Sum/$1/0" "$2" "%.2f"; }  # tget <ranks> <counter>
if ((trc == 0)) && [[ -n "$(tget 2 paired_ratio)" ]]; then
  THREADS="paired_ratio $(tget 2 paired_ratio)/$(tget 4 paired_ratio)/$(tget 8 paired_ratio) at 2/4/8 ranks"
  THREADS="$THREADS (copy on n threads: $(tget 2 paired_ratio_n_threads)/$(tget 4 paired_ratio_n_threads)/$(tget 8 paired_ratio_n_threads); copy $(tget 8 paired_B_GBps) GB/s)"
else
  F=$((F + 1)); FAILED_TESTS+=("comm_bench threads")
  THREADS="FAILED (exit $trc)"
fi
hr
glog="$LOGS/gemm.log"
timeout 300 "$HERE/bin/gemm_gpu_bench" >"$glog" 2>&1
grc=$?
cat "$glog"
if ((grc == 0)); then
  GEMM="$(grep -E '^gemm:' "$glog" | sed 's/^gemm: //')"
else
  F=$((F + 1)); FAILED_TESTS+=("gemm_gpu_bench"); GEMM="FAILED (exit $grc)"
fi
hr

verdict=$([[ $F -eq 0 ]] && echo OK || echo "FAILED (${FAILED_TESTS[*]})")
summary "$verdict; $GPUS x $GPU_NAME; tests: $P passed, $F failed, $S skipped, $NOT_RUN not run (need more GPUs); allreduce $ALLREDUCE vs device memcpy $MEMCPY; threads backend $THREADS; gemm $GEMM"
((F == 0))
