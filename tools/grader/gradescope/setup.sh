#!/usr/bin/env bash
# Gradescope image setup: the course checkout is /autograder/source. Installs the packages and the grader's
# user, then grades each lab's stubs once so that the Bazel disk cache and the grading tree are warm: a
# submission then compiles only its own files and links the tests (a cold build of the runtime and the hidden
# tests takes minutes of a grading's budget on a hosted machine).
#
# On Debian 12 all of that happens on the image itself. Anywhere else (Gradescope's images are Ubuntu, whose
# Bazel is too old: README, "Supported platforms") it happens in a Debian 12 root, /opt/distlab-root, made
# with debootstrap (tools/debian_root.sh); the checkout is copied into it at the same path, and
# run_autograder grades there. DISTLAB_GRADESCOPE_ROOT=1 takes the root route on Debian 12 too (how the route
# was checked). Entering the root binds /proc and /dev into it, which needs a container with CAP_SYS_ADMIN.
set -euo pipefail
source=/autograder/source
root=/opt/distlab-root

warm() {
  cd "$source"
  ./labctl setup
  local lab
  for lab in $(ls labs); do
    [[ -f "labs/$lab/lab.bzl" && -d "tests/$lab" ]] || continue
    ./labctl grade --submission "labs/$lab" --lab "$lab" --out "/tmp/warm-$lab.json" >/dev/null 2>&1 || true
  done
}

if [[ "${1:-}" == --in-root ]]; then warm; exit 0; fi

id=$(. /etc/os-release 2>/dev/null && echo "${ID:-}-${VERSION_ID:-}") || id=unknown
if [[ "$id" == debian-12 && "${DISTLAB_GRADESCOPE_ROOT:-0}" != 1 ]]; then warm; exit 0; fi

if [[ "$id" == debian-12 ]]; then
  echo "setup: DISTLAB_GRADESCOPE_ROOT=1: the course goes into a Debian 12 root at $root"
else
  echo "setup: $id is not Debian 12; the course goes into a Debian 12 root at $root"
fi
"$source/tools/debian_root.sh" make "$root"
rm -rf "$root$source"
mkdir -p "$root$source" "$root/autograder/submission" "$root/autograder/results"
cp -a "$source/." "$root$source/"
"$source/tools/debian_root.sh" run "$root" --cd "$source" -- "$source/tools/grader/gradescope/setup.sh" --in-root
