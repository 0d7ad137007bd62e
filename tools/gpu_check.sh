#!/usr/bin/env bash
# GPU check in two halves (docs/design.md §2). A GPU machine may have the CUDA toolkit with its own cuBLAS and
# NCCL but no Bazel, no Debian libraries and no network, so:
#
#   tools/gpu_check.sh pack OUT   (on a build machine with Bazel and the CUDA toolkit)
#       builds every test tagged `gpu`, the comm benchmark and the cuBLAS GEMM benchmark with --config=gpu
#       (and --config=solution where solutions/ exists, so lab GPU tests link the reference solutions),
#       copies them (stripped; identical binaries once) into OUT/bin with the shared libraries they load
#       except the CUDA runtime, cuBLAS, NCCL and glibc (OUT/lib; libstdc++/libgcc_s go to OUT/lib/compat and
#       are used only when the GPU machine's own are too old; libraries over 8 MiB gzipped), and writes
#       OUT/tests.txt and OUT/run.sh. The labs' tests come as the binaries behind their GPU variants
#       (gpu.bzl: gpu_variant), which run.sh starts with DISTLAB_TEST_BACKEND=nccl.
#       NCCL is not among the libraries ldd lists: the nccl backend loads libnccl.so.2 (and libcudart) with
#       dlopen by soname, so run.sh's LD_LIBRARY_PATH decides which copy it gets, as for the linked ones.
#
#   OUT/run.sh                    (on the GPU machine; installs nothing, needs no network)
#       finds that machine's libcudart/libcublas/libnccl, prints nvidia-smi, runs every GPU test whose rank
#       count fits the GPUs found, the AllReduce benchmark on the nccl backend (algbw and busbw beside the
#       device memcpy bandwidth) and the cuBLAS GEMM throughput, and ends with ONE summary line.
set -euo pipefail

usage() {
  echo "usage: tools/gpu_check.sh pack OUT" >&2
  exit 2
}

[[ $# -eq 2 && "$1" == "pack" ]] || usage
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$2"
cd "$ROOT"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/bin" "$OUT/lib"
mkdir -p "$OUT/bin" "$OUT/lib/compat"

bazel=(bazel)
say() { echo "gpu_check pack: $*" >&2; }

# Every GPU test with its rank count (tag gpus=N), plus the two benchmarks.
declare -A GPUS=()
for n in 1 2 4 8; do
  while read -r t; do
    [[ -n "$t" ]] && GPUS["$t"]=$n
  done < <("${bazel[@]}" query "attr(tags, '\\bgpus=$n\\b', attr(tags, '\\bgpu\\b', tests(//...)))" 2>/dev/null)
done
((${#GPUS[@]})) || { say "no test tagged gpu found (is the CUDA toolkit installed here?)"; exit 1; }
# A GPU variant of a lab test (gpu.bzl: gpu_variant, tag `variant`) is an sh_test around the lab test's own
# binary, <name> for <name>_gpu: that binary is packed, and run.sh sets DISTLAB_TEST_BACKEND=nccl for it.
declare -A BINARY_OF=()
while read -r t; do
  [[ -n "$t" ]] && BINARY_OF["$t"]="${t%_gpu}"
done < <("${bazel[@]}" query "attr(tags, '\\bvariant\\b', attr(tags, '\\bgpu\\b', tests(//...)))" 2>/dev/null)
BENCHES=(//reference/comm:comm_bench //reference/tensor:gemm_gpu_bench)
# In a checkout with the reference solutions, the lab GPU tests link them (this checks the runtime and the
# machine); in a student handout they link the student's files.
CONFIG=(--config=gpu)
[[ -d solutions ]] && CONFIG=(--config=solution --config=gpu)
say "building ${#GPUS[@]} GPU tests and ${#BENCHES[@]} benchmarks with ${CONFIG[*]}"
"${bazel[@]}" build "${CONFIG[@]}" "${!GPUS[@]}" "${BINARY_OF[@]}" "${BENCHES[@]}" >&2
BIN="$("${bazel[@]}" info "${CONFIG[@]}" bazel-bin 2>/dev/null)"

# Shared libraries the CUDA machine provides itself, and glibc's own (never shipped).
skip_lib() {
  case "$1" in
    libcudart.so* | libcublas.so* | libcublasLt.so* | libnccl.so* | libcuda.so* | libnvidia-*) return 0 ;;
    linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
      libresolv.so* | libutil.so*) return 0 ;;
  esac
  return 1
}

declare -A SEEN_HASH=()
: >"$OUT/tests.txt"
STORED=""
copy_binary() {  # $1 = label, $2 = name in OUT/bin; sets STORED to the file name it was stored under
  local label="$1" name="$2" path hash
  path="$BIN/$(sed -e 's|^//||' -e 's|:|/|' <<<"$label")"
  [[ -x "$path" ]] || { say "missing binary for $label at $path"; exit 1; }
  hash=$(sha256sum "$path" | cut -c1-16)
  if [[ -n "${SEEN_HASH[$hash]:-}" ]]; then
    STORED="${SEEN_HASH[$hash]}"
    return
  fi
  cp "$path" "$OUT/bin/$name"
  chmod u+w "$OUT/bin/$name"
  strip --strip-debug "$OUT/bin/$name"
  SEEN_HASH[$hash]="$name"
  # The libraries it loads (ldd resolves them the way this machine would).
  local lib dest
  while read -r lib dest; do
    [[ -n "$dest" && -f "$dest" ]] || continue
    skip_lib "$lib" && continue
    case "$lib" in
      libstdc++.so* | libgcc_s.so*) [[ -f "$OUT/lib/compat/$lib" ]] || cp -L "$dest" "$OUT/lib/compat/$lib" ;;
      *) [[ -f "$OUT/lib/$lib" ]] || { cp -L "$dest" "$OUT/lib/$lib"; chmod u+w "$OUT/lib/$lib"; strip --strip-debug "$OUT/lib/$lib" 2>/dev/null || true; } ;;
    esac
  done < <(ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  STORED="$name"
}

for label in $(printf '%s\n' "${!GPUS[@]}" | sort); do
  binary="${BINARY_OF[$label]:-$label}"
  copy_binary "$binary" "$(sed -e 's|^//||' -e 's|[:/]|_|g' <<<"$binary")"
  printf '%s %s %s\n' "$label" "${GPUS[$label]}" "$STORED" >>"$OUT/tests.txt"
done
copy_binary //reference/comm:comm_bench comm_bench
copy_binary //reference/tensor:gemm_gpu_bench gemm_gpu_bench

# OpenBLAS (36 MiB, kernels for every CPU) and any other library over 8 MiB go gzipped; run.sh unpacks them.
for lib in "$OUT"/lib/*.so*; do
  [[ -f "$lib" && $(stat -c %s "$lib") -gt $((8 << 20)) ]] && gzip -9 "$lib"
done
cp "$ROOT/tools/gpu_check_run.sh" "$OUT/run.sh"
chmod 755 "$OUT/run.sh"
size_kib=$(du -sk "$OUT" | cut -f1)
say "packed $(wc -l <"$OUT/tests.txt") GPU tests ($(ls "$OUT/bin" | wc -l) binaries) and $(ls "$OUT/lib" "$OUT/lib/compat" | grep -c '\.so') libraries into $OUT: $((size_kib / 1024)) MiB"
if ((size_kib > 64 * 1024)); then
  say "the pack is over 64 MiB"
  exit 1
fi
