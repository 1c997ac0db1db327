#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v4) from the Go module proxy, for the chart tests
# (tests/chart, tests/e2e/test_chart*.py) and for anyone installing the chart
# (deploy/helm/arkgpu, docs/INSTALL.md) on a machine without helm.
#
# helm's own go.mod pins every dependency and has no replace directives, so the
# command is built as published (`go install helm.sh/helm/v4/cmd/helm@v<version>`):
# no wrapper module. The binary lands in a cache directory outside the checkout:
#   ${ARKGPU_HELM_CACHE:-$HOME/.cache/arkgpu/helm/v<version>}/bin/helm
# Idempotent: when that binary of this version is there, it prints the bin
# directory and exits at once.
#
# Usage: scripts/build-helm.sh          (prints the bin directory last)
#        scripts/build-helm.sh --check  (prints it and exits 0 when built; exits 1 otherwise,
#                                        building nothing)
# Environment: ARKGPU_HELM_VERSION (default 4.3.2), ARKGPU_HELM_CACHE.
# Go builds run under `nice -n 19` with GOMAXPROCS=2: the machine is shared.
set -euo pipefail

HELM_VERSION="${ARKGPU_HELM_VERSION:-4.3.2}"
MODULE="helm.sh/helm/v${HELM_VERSION%%.*}"
CACHE="${ARKGPU_HELM_CACHE:-$HOME/.cache/arkgpu/helm/v$HELM_VERSION}"
# shellcheck source=lib/go-build.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/go-build.sh"

CHECK=0
case "${1:-}" in
    "") ;;
    --check) CHECK=1 ;;
    *) echo "build-helm: unknown argument '$1' (only --check)" >&2; exit 2 ;;
esac
go_require build-helm
[[ "$HELM_VERSION" =~ ^4\.[0-9]+\.[0-9]+$ ]] || { echo "build-helm: ARKGPU_HELM_VERSION must be a helm 4 release such as 4.3.2, not '$HELM_VERSION'" >&2; exit 2; }

STAMP_WANT="$MODULE v$HELM_VERSION"
built() { [[ -x "$CACHE/bin/helm" && -f "$CACHE/bin/.stamp" && "$(cat "$CACHE/bin/.stamp")" == "$STAMP_WANT" ]]; }
if built; then
    echo "$CACHE/bin"
    exit 0
fi
[[ "$CHECK" == 1 ]] && exit 1
cache_lock build-helm "$CACHE"
if built; then
    echo "$CACHE/bin"
    exit 0
fi

go_setup
rm -rf "$CACHE/bin" "$CACHE/tmp"
mkdir -p "$CACHE/tmp"

start=$SECONDS
echo "build-helm: fetching $MODULE@v$HELM_VERSION and its dependencies from $(go env GOPROXY) ..." >&2
if ! "${GO[@]}" mod download -json "$MODULE@v$HELM_VERSION" > "$CACHE/tmp/download.json"; then
    why="$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",*$/\1/p' "$CACHE/tmp/download.json")"
    echo "build-helm: cannot fetch $MODULE@v$HELM_VERSION: ${why:-see above}" >&2
    exit 1
fi
echo "build-helm: building helm v$HELM_VERSION (several minutes on 2 cores the first time) ..." >&2
LDFLAGS="-s -w -X $MODULE/internal/version.version=v$HELM_VERSION"
LDFLAGS+=" -X $MODULE/internal/version.gitTreeState=clean"
if ! GOBIN="$CACHE/tmp" "${GO[@]}" install -ldflags="$LDFLAGS" "$MODULE/cmd/helm@v$HELM_VERSION"; then
    echo "build-helm: 'go install $MODULE/cmd/helm@v$HELM_VERSION' failed (its reason is above)" >&2
    exit 1
fi
mkdir -p "$CACHE/bin"
mv "$CACHE/tmp/helm" "$CACHE/bin/helm"
rm -rf "$CACHE/tmp"
echo "$STAMP_WANT" > "$CACHE/bin/.stamp"
echo "build-helm: built helm v$HELM_VERSION in $((SECONDS - start)) s" >&2
echo "$CACHE/bin"
