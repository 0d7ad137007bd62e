#!/usr/bin/env bash
# The Dockerfile's steps, run without Docker: in a Debian 12 root made with debootstrap (the same minimal
# system as the debian:12 image; tools/debian_root.sh), entered with chroot. This is how README's "Supported
# platforms" checked the container on a machine that has no Docker.
#
#   tools/container_check.sh ROOT [COMMAND]     (as root)
#
# ROOT is made if it does not exist (a few minutes; about 300 MB, 2 GB after setup). Then, as the Dockerfile
# does: labctl is copied to /opt/distlab/, `labctl setup` runs, /workspace is a safe git directory. Then this
# checkout's HEAD is cloned into ROOT/workspace (a clean clone: nothing uncommitted travels) and COMMAND runs
# there (default `./labctl test`), timed.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,11p' "$0"; exit 2; }
root_dir="$(realpath -m "$1")"
shift
command_line="${*:-./labctl test}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
in_root() { "$here/tools/debian_root.sh" run "$root_dir" "$@"; }

"$here/tools/debian_root.sh" make "$root_dir"

# The Dockerfile: COPY labctl /opt/distlab/labctl; RUN labctl setup; RUN git config ... safe.directory.
install -D -m 0755 "$here/labctl" "$root_dir/opt/distlab/labctl"
in_root -- /opt/distlab/labctl setup
in_root -- git config --system --add safe.directory /workspace

# The checkout the container would mount: a clean clone of HEAD.
rm -rf "$root_dir/workspace"
git clone -q "$here" "$root_dir/workspace"
echo "container_check: $(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' "$root_dir/etc/os-release"), running: $command_line"
start=$(date +%s)
status=0
in_root --cd /workspace -- bash -c "$command_line" || status=$?
echo "container_check: exit $status after $(($(date +%s) - start)) s"
exit "$status"
