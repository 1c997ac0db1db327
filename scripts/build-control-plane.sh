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
STAGING_VERSION="0.${K8S_VERSION#1.}"   # k8s.io/api etc.: v0.37.2 for v1.37.2
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WRAPPERS="$HERE/control-plane"
CACHE="${ARKGPU_CONTROL_PLANE_CACHE:-$HOME/.cache/arkgpu/control-plane/v$K8S_VERSION}"
BINARIES=(etcd kube-apiserver kube-scheduler)

command -v go >/dev/null || { echo "build-control-plane: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 2; }
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
# One build at a time per cache (several checkouts may run their tests at once);
# whoever waited finds the other's build done.
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
    echo "build-control-plane: waiting for another build in $CACHE" >&2
    flock 9
fi
if built; then
    echo "$CACHE/bin"
    exit 0
fi

export GOTOOLCHAIN=local GOFLAGS=-trimpath GOMAXPROCS="${GOMAXPROCS:-2}" CGO_ENABLED=0
GO=(nice -n 19 go)
mkdir -p "$CACHE/cmd" "$CACHE/bin"
rm -f "$CACHE/bin/.stamp"
for b in "${BINARIES[@]}"; do
    mkdir -p "$CACHE/cmd/$b"
    cp "$WRAPPERS/$b/main.go" "$CACHE/cmd/$b/main.go"
done

echo "build-control-plane: resolving k8s.io/kubernetes v$K8S_VERSION in $CACHE" >&2
# k8s.io/kubernetes points its staging modules at ./staging/src; as a dependency
# each must be replaced by the published module of the matching v0.x version.
if ! KJSON="$(cd "$CACHE" && "${GO[@]}" mod download -json "k8s.io/kubernetes@v$K8S_VERSION")"; then
    why="$(printf '%s\n' "$KJSON" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",*$/\1/p')"
    echo "build-control-plane: cannot fetch k8s.io/kubernetes@v$K8S_VERSION from $(go env GOPROXY): ${why:-see above}" >&2
    exit 1
fi
KMOD="$(printf '%s\n' "$KJSON" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
[[ -f "$KMOD" ]] || { echo "build-control-plane: no go.mod for k8s.io/kubernetes@v$K8S_VERSION in the module cache" >&2; exit 1; }
{
    echo "module arkgpu.local/control-plane"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*$#\t\1 => \1 v'"$STAGING_VERSION"'#p' "$KMOD"
    echo ")"
} > "$CACHE/go.mod"
(cd "$CACHE" && "${GO[@]}" mod tidy)

LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
LDFLAGS+=" -X k8s.io/component-base/version.gitMajor=1"
LDFLAGS+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
LDFLAGS+=" -X k8s.io/component-base/version.gitTreeState=clean"
for b in "${BINARIES[@]}"; do
    start=$SECONDS
    echo "build-control-plane: building $b (v$K8S_VERSION) ..." >&2
    (cd "$CACHE" && "${GO[@]}" build -ldflags="$LDFLAGS" -o "bin/$b.tmp" "./cmd/$b")
    mv "$CACHE/bin/$b.tmp" "$CACHE/bin/$b"
    echo "build-control-plane: built $b in $((SECONDS - start)) s" >&2
done
echo "$STAMP_WANT" > "$CACHE/bin/.stamp"
echo "$CACHE/bin"
