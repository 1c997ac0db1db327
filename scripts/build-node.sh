#!/usr/bin/env bash
# Builds the real Kubernetes node that ArkGPU's real-node tests run
# (tests/e2e/node): kubelet, kube-controller-manager, kubectl and kube-proxy from
# k8s.io/kubernetes, containerd (with ctr and the runc shim), runc, the CNI
# plugins bridge, host-local, loopback and portmap, all through the Go module
# proxy, the pause image from kubernetes' own pause.c and an image of CoreDNS (the
# cluster's DNS, built with the plugins the tests' Corefile uses), packed as OCI
# archives for `ctr images import` (no registry is reached).
#
# Everything lands in a cache directory outside the checkout:
#   ${ARKGPU_NODE_CACHE:-$HOME/.cache/arkgpu/node/v<k8s version>}/bin      the programs
#                                                                /cni      the CNI plugins
#                                                                /images   pause.tar, coredns.tar
# Only the thin main.go wrappers of the Kubernetes commands and of CoreDNS live in
# the repository (scripts/node/); containerd, runc and the CNI plugins are built
# as published (`go install module/cmd@version`).
# Idempotent: when this build of these versions and wrappers is there, it prints
# the bin directory and exits at once.
#
# Usage: scripts/build-node.sh          (prints the bin directory last)
#        scripts/build-node.sh --check  (prints it and exits 0 when built; exits 1 otherwise)
# Environment: ARKGPU_K8S_VERSION (1.37.2), ARKGPU_CONTAINERD_VERSION (2.4.2),
# ARKGPU_RUNC_VERSION (1.5.3), ARKGPU_CNI_VERSION (1.10.0), ARKGPU_COREDNS_VERSION
# (1.14.7), ARKGPU_NODE_CACHE.
# runc needs cgo and Debian's libseccomp-dev, kube-proxy (iptables mode) Debian's
# iptables at run time (both installed with apt-get when missing and run as root);
# the pause binary needs gcc and glibc's static libc.
# Go builds run under `nice -n 19` with GOMAXPROCS=2: the machine is shared.
set -euo pipefail

K8S_VERSION="${ARKGPU_K8S_VERSION:-1.37.2}"
CONTAINERD_VERSION="${ARKGPU_CONTAINERD_VERSION:-2.4.2}"
RUNC_VERSION="${ARKGPU_RUNC_VERSION:-1.5.3}"
CNI_VERSION="${ARKGPU_CNI_VERSION:-1.10.0}"
COREDNS_VERSION="${ARKGPU_COREDNS_VERSION:-1.14.7}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/go-build.sh
source "$HERE/lib/go-build.sh"
WRAPPERS="$HERE/node"
CACHE="${ARKGPU_NODE_CACHE:-$HOME/.cache/arkgpu/node/v$K8S_VERSION}"
K8S_BINARIES=(kubelet kube-controller-manager kubectl kube-proxy)
CNI_PLUGINS=(main/bridge ipam/host-local main/loopback meta/portmap)
PAUSE_IMAGE="registry.k8s.io/pause:arkgpu-$K8S_VERSION"
COREDNS_IMAGE="arkgpu.local/coredns:v$COREDNS_VERSION"

CHECK=0
case "${1:-}" in
    "") ;;
    --check) CHECK=1 ;;
    *) echo "build-node: unknown argument '$1' (only --check)" >&2; exit 2 ;;
esac
go_require build-node
# apt_need WHAT PACKAGE TEST...: installs Debian's PACKAGE (for WHAT) when TEST fails.
apt_need() {
    local what="$1" package="$2"
    shift 2
    "$@" && return 0
    [[ "$(id -u)" == 0 ]] || { echo "build-node: $what needs $package: run 'apt-get install $package' as root" >&2; exit 2; }
    echo "build-node: installing $package (for $what) ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >&2 \
        || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >&2; }
}
for b in "${K8S_BINARIES[@]}"; do
    [[ -f "$WRAPPERS/$b/main.go" ]] || { echo "build-node: missing $WRAPPERS/$b/main.go" >&2; exit 2; }
done

# The stamp names what was built: every version, the wrappers and the image packer.
STAMP_WANT="k8s v$K8S_VERSION containerd v$CONTAINERD_VERSION runc v$RUNC_VERSION cni v$CNI_VERSION"
STAMP_WANT+=" coredns v$COREDNS_VERSION"
STAMP_WANT+=" $(cat "$WRAPPERS"/*/main.go "$HERE/imagebuild/pack.py" "$HERE/imagebuild/oci.py" | cksum | cut -d' ' -f1)"
built() { [[ -f "$CACHE/bin/.stamp" && "$(cat "$CACHE/bin/.stamp")" == "$STAMP_WANT" ]]; }
have_iptables() { [[ -x /usr/sbin/iptables-restore ]]; }
if built && have_iptables; then
    echo "$CACHE/bin"
    exit 0
fi
[[ "$CHECK" == 1 ]] && exit 1
apt_need "kube-proxy (iptables mode)" iptables have_iptables
cache_lock build-node "$CACHE"
if built; then
    echo "$CACHE/bin"
    exit 0
fi
apt_need "runc's seccomp support" libseccomp-dev test -f /usr/include/seccomp.h
command -v gcc >/dev/null || { echo "build-node: 'gcc' not found on PATH (the pause image is built from C)" >&2; exit 2; }

go_setup
mkdir -p "$CACHE/cmd" "$CACHE/bin" "$CACHE/cni" "$CACHE/images"
rm -f "$CACHE/bin/.stamp"
timed() {  # timed WHAT COMMAND...: runs it and says how long it took
    local what="$1" start=$SECONDS
    shift
    echo "build-node: building $what ..." >&2
    "$@"
    echo "build-node: built $what in $((SECONDS - start)) s" >&2
}

# --- kubelet, kube-controller-manager, kubectl: a wrapper module, as for the control plane.
copy_wrappers "$CACHE" "$WRAPPERS" "${K8S_BINARIES[@]}"
k8s_module build-node "$CACHE" arkgpu.local/node "$K8S_VERSION"
k8s_build build-node "$CACHE" "$K8S_VERSION" "${K8S_BINARIES[@]}"

# --- containerd, ctr and the runc shim; runc; the CNI plugins: built as published.
CTRD=github.com/containerd/containerd/v2
timed "containerd v$CONTAINERD_VERSION" env GOBIN="$CACHE/bin" "${GO[@]}" install \
    -ldflags="-s -w -X $CTRD/version.Version=v$CONTAINERD_VERSION" \
    "$CTRD/cmd/containerd@v$CONTAINERD_VERSION" "$CTRD/cmd/ctr@v$CONTAINERD_VERSION" \
    "$CTRD/cmd/containerd-shim-runc-v2@v$CONTAINERD_VERSION"
timed "runc v$RUNC_VERSION" env GOBIN="$CACHE/bin" CGO_ENABLED=1 "${GO[@]}" install -tags seccomp \
    -ldflags="-s -w -X main.version=$RUNC_VERSION" "github.com/opencontainers/runc@v$RUNC_VERSION"
CNI_PKGS=()
for p in "${CNI_PLUGINS[@]}"; do CNI_PKGS+=("github.com/containernetworking/plugins/plugins/$p@v$CNI_VERSION"); done
timed "CNI plugins v$CNI_VERSION" env GOBIN="$CACHE/cni" "${GO[@]}" install -ldflags="-s -w" "${CNI_PKGS[@]}"

# --- the pause image: kubernetes' pause.c, static, alone in a one-layer image.
timed "pause image $PAUSE_IMAGE" gcc -Os -static -Wall -DVERSION="arkgpu-$K8S_VERSION" \
    -o "$CACHE/images/pause" "$KDIR/build/pause/linux/pause.c"
python3 "$HERE/imagebuild/pack.py" "$CACHE/images/pause.tar" "$PAUSE_IMAGE" /pause "$CACHE/images/pause=/pause"
echo "$PAUSE_IMAGE" > "$CACHE/images/pause.name"

# --- CoreDNS: a wrapper module of its own (CoreDNS pins its own client-go), static.
mkdir -p "$CACHE/coredns/cmd/coredns"
cp "$WRAPPERS/coredns/main.go" "$CACHE/coredns/cmd/coredns/main.go"
printf 'module arkgpu.local/coredns\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns v%s\n' \
    "$COREDNS_VERSION" > "$CACHE/coredns/go.mod"
(cd "$CACHE/coredns" && "${GO[@]}" mod tidy)
timed "CoreDNS v$COREDNS_VERSION" env -C "$CACHE/coredns" "${GO[@]}" build -ldflags="-s -w" \
    -o "$CACHE/images/coredns" ./cmd/coredns
python3 "$HERE/imagebuild/pack.py" "$CACHE/images/coredns.tar" "$COREDNS_IMAGE" /coredns \
    "$CACHE/images/coredns=/coredns"
echo "$COREDNS_IMAGE" > "$CACHE/images/coredns.name"

echo "$STAMP_WANT" > "$CACHE/bin/.stamp"
echo "$CACHE/bin"
