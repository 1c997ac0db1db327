#!/usr/bin/env bash
# Builds the Kubernetes control plane that ArkGPU's end-to-end tests run
# (tests/e2e): kube-apiserver and kube-scheduler from k8s.io/kubernetes, and
# etcd from go.etcd.io/etcd/server/v3, through the Go module proxy.
#
# The build is a Go module in a cache directory outside the checkout:
#   ${ARKGPU_CONTROL_PLANE_CACHE:-$HOME/.cache/arkgpu/control-plane/v<version>}
# Only the thin main.go wrappers live in the repository (scripts/control-plane/).
# Idempotent: when the three binaries of this version and these wrappers are
# there, it prints the bin directory and exits at once.
#
# Usage: scripts/build-control-plane.sh        (prints the bin directory last)
# Environment: ARKGPU_K8S_VERSION (default 1.37.2), ARKGPU_CONTROL_PLANE_CACHE.
# Go builds run under `nice -n 19` with GOMAXPROCS=2: the machine is shared.
set -euo pipefail

K8S_VERSION="${ARKGPU_K8S_VERSION:-1.37.2}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/go-build.sh
source "$HERE/lib/go-build.sh"
WRAPPERS="$HERE/control-plane"
CACHE="${ARKGPU_CONTROL_PLANE_CACHE:-$HOME/.cache/arkgpu/control-plane/v$K8S_VERSION}"
BINARIES=(etcd kube-apiserver kube-scheduler)

go_require build-control-plane
for b in "${BINARIES[@]}"; do
    [[ -f "$WRAPPERS/$b/main.go" ]] || { echo "build-control-plane: missing $WRAPPERS/$b/main.go" >&2; exit 2; }
done

# The stamp names what the binaries were built from: the version and the wrappers.
STAMP_WANT="v$K8S_VERSION $(cat "$WRAPPERS"/*/main.go | cksum | cut -d' ' -f1)"
built() { [[ -f "$CACHE/bin/.stamp" && "$(cat "$CACHE/bin/.stamp")" == "$STAMP_WANT" ]]; }
if built; then
    echo "$CACHE/bin"
    exit 0
fi
cache_lock build-control-plane "$CACHE"
if built; then
    echo "$CACHE/bin"
    exit 0
fi

go_setup
mkdir -p "$CACHE/cmd" "$CACHE/bin"
rm -f "$CACHE/bin/.stamp"
copy_wrappers "$CACHE" "$WRAPPERS" "${BINARIES[@]}"
k8s_module build-control-plane "$CACHE" arkgpu.local/control-plane "$K8S_VERSION"
k8s_build build-control-plane "$CACHE" "$K8S_VERSION" "${BINARIES[@]}"
echo "$STAMP_WANT" > "$CACHE/bin/.stamp"
echo "$CACHE/bin"
