#!/usr/bin/env bash
# A Debian 12 root for a machine that is not Debian 12 (Gradescope's Ubuntu images), and for checking the
# Dockerfile's steps where there is no Docker (tools/container_check.sh). As root:
#
#   tools/debian_root.sh make ROOT
#       Makes ROOT with `debootstrap --variant=minbase bookworm` (the system the debian:12 image is made of),
#       checked against Debian's archive keyring. Installs debootstrap and debian-archive-keyring with the
#       host's apt-get when they are missing. Nothing is done when ROOT already holds a system.
#   tools/debian_root.sh run ROOT [--bind DIR]... [--cd DIR] -- COMMAND [ARG]...
#       Binds /proc, /sys, /dev, /dev/pts and /dev/shm into ROOT, as a container runtime provides them, and
#       each DIR at the same path inside; runs COMMAND there (in DIR of --cd) with a clean environment (PATH,
#       HOME=/root, LANG, and every DISTLAB_* variable of the caller); unbinds everything; exits with
#       COMMAND's status. Each DIR and the --cd folder are safe git directories in ROOT (its /etc/gitconfig),
#       so a checkout owned by a user of the host works there. SIGTERM, SIGINT and SIGHUP are passed on to COMMAND, which is waited for.
#
# Exit status 3: ROOT could not be made or entered (the message says why: not root, no apt-get, a mount the
# machine refuses -- a container without CAP_SYS_ADMIN cannot bind /proc).
set -euo pipefail

fail() { echo "debian_root: $*" >&2; exit 3; }
usage() { sed -n '2,18p' "$0" >&2; exit 2; }

[[ $# -ge 2 ]] || usage
verb="$1"
root_dir="$(realpath -m "$2")"
shift 2
[[ $(id -u) -eq 0 ]] || fail "needs root (debootstrap, mount, chroot)"

make_root() {
  [[ -x "$root_dir/bin/bash" ]] && return 0
  local need=()
  command -v debootstrap >/dev/null || need+=(debootstrap)
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [[ -r "$keyring" ]] || need+=(debian-archive-keyring)
  if ((${#need[@]})); then
    command -v apt-get >/dev/null || fail "this machine has no apt-get to install ${need[*]}; install them and run again"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
      fail "could not install ${need[*]} (on Ubuntu they are in the universe component)"
  fi
  # An older debootstrap may not know bookworm by name; its sid script makes the same system.
  local script=()
  [[ -e /usr/share/debootstrap/scripts/bookworm ]] || script=(/usr/share/debootstrap/scripts/sid)
  echo "debian_root: making a Debian 12 root in $root_dir (minutes)" >&2
  debootstrap --variant=minbase --keyring="$keyring" bookworm "$root_dir" http://deb.debian.org/debian \
    "${script[@]}" || fail "debootstrap failed (its log: $root_dir/debootstrap/debootstrap.log)"
}

mounted=()
unbind_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  mounted=()
}

bind() {  # bind SOURCE TARGET_INSIDE_ROOT
  mkdir -p "$root_dir$2"
  mount --bind "$1" "$root_dir$2" ||
    fail "could not bind $1 into $root_dir (mounting needs CAP_SYS_ADMIN; a container must be started with it)"
  mounted+=("$root_dir$2")
}

run_in_root() {
  local binds=() cd_dir=/
  while (($#)); do case "$1" in
    --bind) [[ $# -ge 2 ]] || usage; binds+=("$(realpath -m "$2")"); shift 2 ;;
    --cd) [[ $# -ge 2 ]] || usage; cd_dir="$2"; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac; done
  [[ $# -ge 1 ]] || usage
  [[ -x "$root_dir/bin/bash" ]] || fail "$root_dir holds no system; make it first (tools/debian_root.sh make)"
  trap unbind_all EXIT
  local d
  for d in /proc /sys /dev /dev/pts /dev/shm; do bind "$d" "$d"; done
  for d in "${binds[@]}"; do
    [[ -d "$d" ]] || fail "no folder $d to bind"
    bind "$d" "$d"
  done
  cp /etc/resolv.conf "$root_dir/etc/resolv.conf" 2>/dev/null || true
  # A checkout bound in belongs to a user of the host; git refuses to work in it unless told it is safe.
  for d in "${binds[@]}" "$cd_dir"; do
    grep -qxF "	directory = $d" "$root_dir/etc/gitconfig" 2>/dev/null ||
      printf '[safe]\n\tdirectory = %s\n' "$d" >>"$root_dir/etc/gitconfig"
  done
  local env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
  local v
  while IFS= read -r v; do env+=("$v=${!v}"); done < <(compgen -v DISTLAB_ || true)
  local status=0 pid
  chroot "$root_dir" /usr/bin/env -i "${env[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' _ "$cd_dir" "$@" &
  pid=$!
  trap 'kill -TERM $pid 2>/dev/null || true' TERM
  trap 'kill -INT $pid 2>/dev/null || true' INT
  trap 'kill -HUP $pid 2>/dev/null || true' HUP
  while kill -0 "$pid" 2>/dev/null; do wait "$pid" 2>/dev/null || true; done
  wait "$pid" 2>/dev/null || status=$?
  trap - TERM INT HUP
  unbind_all
  return "$status"
}

case "$verb" in
  make) [[ $# -eq 0 ]] || usage; make_root ;;
  run) run_in_root "$@" ;;
  *) usage ;;
esac
