#!/usr/bin/env bash
# Lab 3 at corpus scale: generate corpora of the given sizes, run the streaming `dedup` tool (the solution,
# opt build) on each with 1 rank and on the largest with more, collect the tool's --summary objects into one
# JSON array, and draw the figures of time and memory against size (notes/03-dedup.md §5.1).
#
#   demos/dedup/scale_runs.sh WORKDIR [--sizes "100000 1000000"] [--ranks "2 4"] [--figures DIR]
#
# WORKDIR needs room for the largest corpus, its survivors and its shingle sets: about 4 times its text
# (a 10^7-document corpus is 16 GB of text: 6 GB of zstd in, 5 GB out, 16 GB of sets while it runs). The
# corpora are made by gencorpus (4 shards of .jsonl.zst, so that up to 4 ranks each read their own) and
# removed after their runs. Runs on more ranks use threads of one process (--ranks) and processes on Gloo
# (./labctl launch). The summaries go to WORKDIR/runs.json; the figures to --figures (default WORKDIR).
set -euo pipefail

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $# -ge 1 && "$1" != -h && "$1" != --help ]] || usage 1
work="$1"; shift
sizes="100000 1000000" ranks="2 4" figures=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --figures) figures="$2"; shift 2 ;;
    *) echo "scale_runs: unknown argument $1" >&2; usage 1 ;;
  esac
done
figures="${figures:-$work}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$work" "$figures"
work="$(cd "$work" && pwd)"

cd "$repo"
bazel build -c opt --config=solution //labs/dedup:dedup //labs/dedup:gencorpus //demos/dedup:scale_figure
bin="$(bazel info -c opt --config=solution bazel-bin 2>/dev/null)"
# Copies, so that a later build in another configuration cannot move them away mid-run.
cp -f "$bin/labs/dedup/dedup" "$bin/labs/dedup/gencorpus" "$bin/demos/dedup/scale_figure" "$work/"

largest="$(tr ' ' '\n' <<<"$sizes" | sort -n | tail -1)"
summaries=()
for n in $sizes; do
  corpus="$work/c$n"
  rm -rf "$corpus"
  "$work/gencorpus" --documents "$n" --shards 4 --format zst --out "$corpus" --truth-limit 0
  runs=("1")
  [[ "$n" == "$largest" ]] && for r in $ranks; do runs+=("t$r" "p$r"); done
  for run in "${runs[@]}"; do
    out="$work/kept-$n-$run" summary="$work/summary-$n-$run.json"
    rm -rf "$out" "$out.clusters.json"
    common=("$corpus"/*.jsonl.zst --out "$out" --tmp "$work" --quiet --summary "$summary")
    echo "scale_runs: $n documents, run $run" >&2
    case "$run" in
      1) "$work/dedup" "${common[@]}" ;;
      t*) "$work/dedup" "${common[@]}" --ranks "${run#t}" ;;
      p*) ./labctl launch -n "${run#p}" -- "$work/dedup" "${common[@]}" ;;
    esac
    if [[ "$run" != 1 ]] && ! cmp -s "$work/kept-$n-1.clusters.json" "$out.clusters.json"; then
      echo "scale_runs: the report of run $run differs from one process's" >&2
      exit 1
    fi
    summaries+=("$summary")
  done
  rm -rf "$corpus" "$work"/kept-"$n"-*
done
{
  echo "["
  sep=""
  for f in "${summaries[@]}"; do printf '%s' "$sep"; cat "$f"; sep=","; done
  echo "]"
} >"$work/runs.json"
"$work/scale_figure" --runs "$work/runs.json" --out "$figures"
