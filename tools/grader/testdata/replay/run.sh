#!/usr/bin/env bash
# The replay demo of README.md, again: grades the wrong submission under A's seed (A.json again), the replay
# under a fresh seed (B.json) and the replay under A's seed (C.json), and prints the three scores.
#   tools/grader/testdata/replay/run.sh [SEED_A]     (default: the seed of the recorded A.json, in README.md)
# Run from anywhere in the checkout, as ./labctl grade is run (root for the grader's isolation). Each grading
# takes the machine's grading lock, one at a time; about three minutes each here. Results go to out/replay/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
seed_a="${1:-182951176160880}"
work="$(mktemp -d /tmp/replay.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# Two submissions: the solution's files of Lab 1, with lifecycle.cc replaced.
for kind in wrong replay; do
  mkdir -p "$work/$kind"
  cp "$root"/solutions/collectives/*.cc "$work/$kind/"
  cp "$here/${kind}_lifecycle.cc.in" "$work/$kind/lifecycle.cc"
done
out="$root/out/replay"
mkdir -p "$out"
cd "$root"
./labctl grade --submission "$work/wrong" --lab collectives --seed "$seed_a" --out "$out/A.json" >"$out/A.log" 2>&1
./labctl grade --submission "$work/replay" --lab collectives --out "$out/B.json" >"$out/B.log" 2>&1
./labctl grade --submission "$work/replay" --lab collectives --seed "$seed_a" --out "$out/C.json" >"$out/C.log" 2>&1
for r in A B C; do
  # "seed" and "score" are the first keys of results.json; no JSON tool is needed.
  seed=$(grep -o '"seed": *[0-9]*' "$out/$r.json" | head -1 | grep -o '[0-9]*$')
  score=$(grep -o '"score": *[0-9.]*' "$out/$r.json" | head -1 | grep -o '[0-9.]*$')
  echo "$r: seed $seed, score $score / 198"
done
