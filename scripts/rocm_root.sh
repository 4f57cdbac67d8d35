#!/usr/bin/env bash
# Creates (or reuses) a Debian root holding ROCm's hipcc and rocBLAS, for the HIP build of wick
# (Debian 12 hosts have no usable ROCm), and bind-mounts this repository read-only at ROOT/src/wick
# (builds inside the root write their output elsewhere, e.g. ROOT/tmp). Needs root (debootstrap,
# chroot, mount); about 75 s and 3.5 GB the first time.
#   WICK_ROCM_SUITE=trixie (default): Debian 13, ROCm 5.7 (clang 17), what Debian stable users have.
#   WICK_ROCM_SUITE=forky: Debian testing, HIP 6.4 / hipcc 7 on clang 21, rocBLAS 6.4 (RDNA4 targets).
#     debootstrap has no forky script (sid's is used with the suite name), and the testing mirror's
#     Release file may be past its Valid-Until date, so apt in the root does not check it.
# Usage: bash scripts/rocm_root.sh                make or reuse ROOT, mount the repository there
#        bash scripts/rocm_root.sh --unmount      unmount ROOT/src/wick (when the caller is done)
#        bash scripts/rocm_root.sh --mount-only   only the mount, in an existing ROOT (no packages)
#   WICK_ROCM_ROOT overrides /var/tmp/wick-rocm-root or /var/tmp/wick-rocm-forky.
# Progress goes to stderr; the last line of stdout is ROOT. The read-only bind mount stays in place
# for the caller's chroot commands: unmount it with --unmount when done (scripts/ci_gpu_builds.sh
# does so on leaving each build). Never rm -rf under ROOT/src while it is mounted: `rm` crosses bind
# mounts, and a writable one would take the checkout with it.
set -euo pipefail
action=mount
case "${1:-}" in
  "") ;;
  --unmount) action=unmount ;;
  --mount-only) action=mount-only ;;
  *) echo "rocm_root: unknown argument '$1' (none, --unmount or --mount-only)" >&2; exit 1 ;;
esac
repo="$(cd "$(dirname "$0")/.." && pwd -P)"
suite="${WICK_ROCM_SUITE:-trixie}"
case "$suite" in
  trixie) root="${WICK_ROCM_ROOT:-/var/tmp/wick-rocm-root}"; script="" ;;
  forky) root="${WICK_ROCM_ROOT:-/var/tmp/wick-rocm-forky}"; script=/usr/share/debootstrap/scripts/sid ;;
  *) echo "rocm_root: WICK_ROCM_SUITE must be trixie or forky, got '$suite'" >&2; exit 1 ;;
esac
pkgs=(hipcc libamdhip64-dev librocblas-dev cmake ninja-build g++ libopenblas-dev nlohmann-json3-dev libgtest-dev libcli11-dev libpcre2-dev)

say() { echo "rocm_root: $*" >&2; }
die() { say "error: $*"; exit 1; }

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "needs root (debootstrap, chroot, mount) and sudo is missing"
  sudo="sudo"
fi

root="$(realpath -m "$root")"
case "$root/" in
  "$repo"/*) die "WICK_ROCM_ROOT=$root lies inside the repository; the bind mount would recurse. Pick a path outside $repo" ;;
esac
mnt="$root/src/wick"

# The read-only bind mount of the repository at $mnt.
is_ro_mount() { findmnt -n -o OPTIONS --target "$1" 2>/dev/null | tr ',' '\n' | grep -qx ro; }
unmount_repo() {
  if mountpoint -q "$mnt"; then
    $sudo umount "$mnt"
    say "unmounted $mnt"
  fi
}
mount_repo_ro() {
  $sudo mkdir -p "$mnt"
  if mountpoint -q "$mnt" && [ "$(stat -c %d:%i "$mnt")" != "$(stat -c %d:%i "$repo")" ]; then
    say "$mnt showed another checkout (an earlier run's); remounting this one"
    $sudo umount "$mnt"
  fi
  if mountpoint -q "$mnt" && ! is_ro_mount "$mnt"; then
    say "$mnt was mounted read-write; remounting it read-only"
    $sudo mount -o remount,bind,ro "$mnt"
  fi
  if ! mountpoint -q "$mnt"; then
    $sudo mount --bind "$repo" "$mnt"
    # A bind mount takes the source's flags; ro needs the remount. Left writable, it is undone.
    $sudo mount -o remount,bind,ro "$mnt" || { $sudo umount "$mnt"; die "could not make $mnt read-only"; }
    say "mounted $repo read-only at $mnt"
  fi
  is_ro_mount "$mnt" || { $sudo umount "$mnt"; die "$mnt is not read-only after mounting; unmounted it"; }
}

if [ "$action" = unmount ]; then
  unmount_repo
  exit 0
fi
if [ "$action" = mount-only ]; then
  [ -d "$root" ] || die "--mount-only: $root does not exist"
  mount_repo_ro
  echo "$root"
  exit 0
fi
$sudo mkdir -p "$root"

# The host's own Debian mirror: the first URIs: line of the deb822 sources, else the first
# deb line of sources.list.
mirror_of_host() {
  local m=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    m="$(awk '$1 == "URIs:" { print $2; exit }' /etc/apt/sources.list.d/debian.sources)"
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m="$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)"
  fi
  echo "$m"
}

# A root that has every package is reused; one made by an older list gets what it lacks.
root_complete() {
  [ -x "$root/usr/bin/hipcc" ] && $sudo chroot "$root" dpkg -s "${pkgs[@]}" >/dev/null 2>&1
}
if root_complete; then
  say "reusing $root (every package present)"
else
  t0=$SECONDS
  # debootstrap removes ROOT/debootstrap when it finishes; a root without apt or with that
  # directory left over was interrupted and is bootstrapped again.
  if [ ! -x "$root/usr/bin/apt-get" ] || [ -d "$root/debootstrap" ]; then
    command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
    mirror="$(mirror_of_host)"
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
    say "debootstrap $suite into $root from $mirror"
    $sudo debootstrap --variant=minbase "$suite" "$root" "$mirror" $script >&2
  fi
  if [ "$suite" = forky ]; then
    echo 'Acquire::Check-Valid-Until "false";' | $sudo tee "$root/etc/apt/apt.conf.d/99wick-no-valid-until" >/dev/null
  fi
  [ -f /etc/resolv.conf ] && $sudo cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # Some maintainer scripts want /proc; mounted for the install only.
  $sudo mount -t proc proc "$root/proc"
  trap '$sudo umount "$root/proc" 2>/dev/null || true' EXIT
  say "installing ${pkgs[*]}"
  $sudo chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $sudo chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${pkgs[@]}" >&2
  $sudo chroot "$root" apt-get clean
  $sudo umount "$root/proc"
  trap - EXIT
  [ -x "$root/usr/bin/hipcc" ] || die "hipcc is still missing in $root after the install"
  say "root ready in $((SECONDS - t0)) s"
fi

# The repository at ROOT/src/wick, read-only: reuse a bind mount of this same directory, replace another.
mount_repo_ro
echo "$root"
