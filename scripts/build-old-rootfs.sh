#!/usr/bin/env bash
# Builds a Debian root file system with an older glibc than this machine's, for
# tests/oldglibc: the interception library must load in images built on an
# old glibc (docs/LIMITER.md, "glibc baseline"). The tree is made by mmdebstrap
# (installed through apt-get when missing) from the Debian mirror this machine's
# apt already uses, with libc6-dev so that a test program can be built against
# that glibc (gcc --sysroot). It lands outside the checkout:
#   ${ARKGPU_ROOTFS_CACHE:-$HOME/.cache/arkgpu/rootfs}/<suite>
# Absolute symbolic links of its library folders are made relative, so that
# the linker finds the tree's own files under --sysroot, not this machine's.
# Idempotent: when the tree of that suite is there, it prints its path at once.
#
# Usage: scripts/build-old-rootfs.sh [SUITE]   (default bullseye: glibc 2.31;
#                                               prints the tree's path last)
# Environment: ARKGPU_ROOTFS_CACHE; ARKGPU_DEBIAN_MIRROR (default: the first
# URIs of /etc/apt/sources.list.d/debian.sources, else of /etc/apt/sources.list).
# Needs root (mmdebstrap's root mode, and apt-get when mmdebstrap is missing).
set -euo pipefail

SUITE="${1:-bullseye}"
[[ "$SUITE" =~ ^[a-z]+$ ]] || { echo "build-old-rootfs: SUITE must be a Debian code name such as bullseye, not '$SUITE'" >&2; exit 2; }
CACHE="${ARKGPU_ROOTFS_CACHE:-$HOME/.cache/arkgpu/rootfs}"
TREE="$CACHE/$SUITE"
if [[ -f "$TREE/.arkgpu-built" ]]; then
    echo "$TREE"
    exit 0
fi
[[ "$(id -u)" == 0 ]] || { echo "build-old-rootfs: must run as root (mmdebstrap, chroot)" >&2; exit 2; }

mirror() {
    if [[ -n "${ARKGPU_DEBIAN_MIRROR:-}" ]]; then echo "$ARKGPU_DEBIAN_MIRROR"; return; fi
    local m=""
    [[ -f /etc/apt/sources.list.d/debian.sources ]] &&
        m="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
    [[ -z "$m" && -f /etc/apt/sources.list ]] &&
        m="$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)"
    [[ -n "$m" ]] || { echo "build-old-rootfs: no Debian mirror in the apt sources; set ARKGPU_DEBIAN_MIRROR" >&2; exit 2; }
    echo "$m"
}
MIRROR="$(mirror)"

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-$SUITE"
flock 9
if [[ -f "$TREE/.arkgpu-built" ]]; then echo "$TREE"; exit 0; fi

if ! command -v mmdebstrap >/dev/null; then
    echo "build-old-rootfs: installing mmdebstrap" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >&2
fi
rm -rf "$TREE.tmp"
echo "build-old-rootfs: mmdebstrap $SUITE from $MIRROR (a minute or two)" >&2
nice -n 19 mmdebstrap --mode=root --variant=minbase --include=libc6-dev \
    "$SUITE" "$TREE.tmp" "$MIRROR" </dev/null >&2
find "$TREE.tmp/lib64" "$TREE.tmp/usr/lib/x86_64-linux-gnu" -maxdepth 1 -lname '/*' |
    while read -r link; do ln -sfr "$TREE.tmp$(readlink "$link")" "$link"; done
rm -rf "$TREE"
mv "$TREE.tmp" "$TREE"
touch "$TREE/.arkgpu-built"
echo "$TREE"
