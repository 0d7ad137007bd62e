#!/usr/bin/env bash
# The Dockerfile's steps, run without Docker: in a Debian 12 root made with debootstrap (the same minimal
# system as the debian:12 image), entered with chroot. This is how README's "Supported platforms" checked the
# container on a machine that has no Docker.
#
#   tools/container_check.sh ROOT [COMMAND]     (as root, on a Debian machine; installs debootstrap if missing)
#
# ROOT is made if it does not exist (a few minutes; about 300 MB, 2 GB after setup). Then, as the Dockerfile
# does: labctl is copied to /opt/distlab/, `labctl setup` runs, /workspace is a safe git directory. Then this
# checkout's HEAD is cloned into ROOT/workspace (a clean clone: nothing uncommitted travels) and COMMAND runs
# there (default `./labctl test`), timed. /proc, /sys, /dev, /dev/pts and /dev/shm are bound into ROOT while
# it runs, as a container runtime provides them, and unbound afterwards.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,12p' "$0"; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "container_check: needs root (debootstrap, mount, chroot)" >&2; exit 2; }
root_dir="$(realpath -m "$1")"
shift
command_line="${*:-./labctl test}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ ! -x "$root_dir/bin/bash" ]]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
  debootstrap --variant=minbase bookworm "$root_dir" http://deb.debian.org/debian
fi

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
}
trap cleanup EXIT
for d in proc sys dev dev/pts dev/shm; do
  mkdir -p "$root_dir/$d"
  mount --bind "/$d" "$root_dir/$d"
  mounted+=("$root_dir/$d")
done
cp /etc/resolv.conf "$root_dir/etc/resolv.conf"

# The Dockerfile: COPY labctl /opt/distlab/labctl; RUN labctl setup; RUN git config ... safe.directory.
install -D -m 0755 "$here/labctl" "$root_dir/opt/distlab/labctl"
chroot "$root_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive /opt/distlab/labctl setup
chroot "$root_dir" git config --system --add safe.directory /workspace

# The checkout the container would mount: a clean clone of HEAD.
rm -rf "$root_dir/workspace"
git clone -q "$here" "$root_dir/workspace"
echo "container_check: $(chroot "$root_dir" sh -c '. /etc/os-release; echo "$PRETTY_NAME"'), running: $command_line"
start=$(date +%s)
status=0
chroot "$root_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  bash -c "cd /workspace && $command_line" || status=$?
echo "container_check: exit $status after $(($(date +%s) - start)) s"
exit "$status"
