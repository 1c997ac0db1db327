# Shared by scripts/build-control-plane.sh, build-node.sh and build-helm.sh (sourced,
# not run): the Go set-up, the one-build-per-cache lock, and the wrapper module
# that builds commands of k8s.io/kubernetes. Each function takes the calling
# script's name (PROG) for its messages. The callers keep their own stamps.

# go_require PROG: exit 2 with a one-line error when `go` is not on PATH.
go_require() {
    command -v go >/dev/null || { echo "$1: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 2; }
}

# go_setup: the environment of every build (the machine is shared: nice, 2 threads);
# sets GO, the command prefix.
go_setup() {
    export GOTOOLCHAIN=local GOFLAGS=-trimpath GOMAXPROCS="${GOMAXPROCS:-2}" CGO_ENABLED=0
    GO=(nice -n 19 go)
}

# cache_lock PROG CACHE: one build at a time per cache (several checkouts may run
# their tests at once); holds the lock on fd 9 until the script exits. The caller
# checks its stamp again afterwards: whoever waited finds the other's build done.
cache_lock() {
    mkdir -p "$2"
    exec 9>"$2/.lock"
    if ! flock -n 9; then
        echo "$1: waiting for another build in $2" >&2
        flock 9
    fi
}

# copy_wrappers CACHE WRAPPERS NAME...: each NAME's main.go into CACHE/cmd/NAME.
copy_wrappers() {
    local cache="$1" wrappers="$2" b
    shift 2
    for b in "$@"; do
        mkdir -p "$cache/cmd/$b"
        cp "$wrappers/$b/main.go" "$cache/cmd/$b/main.go"
    done
}

# k8s_module PROG CACHE MODULE K8S_VERSION: writes CACHE/go.mod (module MODULE,
# requiring k8s.io/kubernetes) and tidies it; sets KDIR, that module's source.
# k8s.io/kubernetes points its staging modules at ./staging/src; as a dependency
# each must be replaced by the published module of the matching v0.x version.
k8s_module() {
    local prog="$1" cache="$2" module="$3" version="$4" kjson kmod why
    local staging="0.${version#1.}"   # k8s.io/api etc.: v0.37.2 for v1.37.2
    echo "$prog: resolving k8s.io/kubernetes v$version in $cache" >&2
    if ! kjson="$(cd "$cache" && "${GO[@]}" mod download -json "k8s.io/kubernetes@v$version")"; then
        why="$(printf '%s\n' "$kjson" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",*$/\1/p')"
        echo "$prog: cannot fetch k8s.io/kubernetes@v$version from $(go env GOPROXY): ${why:-see above}" >&2
        exit 1
    fi
    kmod="$(printf '%s\n' "$kjson" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
    KDIR="$(printf '%s\n' "$kjson" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -f "$kmod" ]] || { echo "$prog: no go.mod for k8s.io/kubernetes@v$version in the module cache" >&2; exit 1; }
    {
        echo "module $module"
        echo
        echo "go 1.26.0"
        echo
        echo "require k8s.io/kubernetes v$version"
        echo
        echo "replace ("
        sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*$#\t\1 => \1 v'"$staging"'#p' "$kmod"
        echo ")"
    } > "$cache/go.mod"
    (cd "$cache" && "${GO[@]}" mod tidy)
}

# k8s_build PROG CACHE K8S_VERSION NAME...: builds each ./cmd/NAME of the wrapper
# module into CACHE/bin with kubernetes' version stamped in, saying how long it took.
k8s_build() {
    local prog="$1" cache="$2" version="$3" b start ldflags
    shift 3
    ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version"
    ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
    ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
    ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
    for b in "$@"; do
        start=$SECONDS
        echo "$prog: building $b (v$version) ..." >&2
        (cd "$cache" && "${GO[@]}" build -ldflags="$ldflags" -o "bin/$b.tmp" "./cmd/$b")
        mv "$cache/bin/$b.tmp" "$cache/bin/$b"
        echo "$prog: built $b in $((SECONDS - start)) s" >&2
    done
}
