#!/usr/bin/env bash
# benchsum on a fixture: every ratio it prints is in the summary with what it compares; an undescribed one is
# listed as such; goals are judged in the direction the benchmark declared.
set -euo pipefail
bin="$1"; fixture="$2"
out="${TEST_TMPDIR:-/tmp}/summary.json"
"$bin" --summary "$out" "$fixture" >"${TEST_TMPDIR:-/tmp}/table.txt" 2>"${TEST_TMPDIR:-/tmp}/stderr.txt"
fail() { echo "FAIL: $*"; echo "--- summary"; cat "$out"; exit 1; }
flat=$(tr -d ' \n' <"$out")
grep -q '"schema":"distlab.bench-summary.v1"' <<<"$flat" || fail "no schema"
grep -q '"benchmark":"BM_Copy/4/real_time","family":"BM_Copy","counter":"ratio","value":0.75,"of":"copyovermemcpy","bound":"memcpy","bound_value":12.5,"higher_is_better":true,"goal":0.5,"meets_goal":true' <<<"$flat" ||
  fail "BM_Copy's ratio with its bound value and goal"
grep -q '"counter":"ms_over_goal","value":1.5,"of":"msover50ms","bound":"thegoal","higher_is_better":false,"goal":1.0,"meets_goal":false' <<<"$flat" ||
  fail "a lower-is-better ratio above its goal must not meet it"
grep -q '"counter":"frac_of_peak","value":0.25,"of":null,"bound":null' <<<"$flat" || fail "the undescribed ratio"
grep -q '"undescribed":\[".*BM_Other:frac_of_peak"\]' <<<"$flat" || fail "the undescribed list"
grep -q 'BM_Other:frac_of_peak has no DISTLAB_BENCH_RATIO description' "${TEST_TMPDIR:-/tmp}/stderr.txt" ||
  fail "no warning on stderr"
if grep -q gflops "$out"; then fail "a counter that is not a ratio is in the summary"; fi
echo PASS
