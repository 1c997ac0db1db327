#!/usr/bin/env bash
# Real-GPU checks of the resource limiter with PyTorch. Run from the repository
# root:  tests/gpu/run.sh [--out DIR] [PYTEST ARGS] | tests/gpu/run.sh --bench [--json PATH]
# It builds the native parts with gcc alone (no virtual environment needed, so
# it also runs on a GPU machine without network). Python: $PYTHON, else
# .venv/bin/python, else python3; src/ is put on PYTHONPATH. As root the
# PyTorch children run as nobody, so the checkout must be readable by nobody.
# Exit status: 0 all passed, 1 a failure, 77 not run (no GPU or no PyTorch) -
# a "not run" is printed as such and is never a pass. With --bench, the tests
# are followed by tests/gpu/bench_limiter.py (figures to stdout and --json).
#
# --out DIR (or $OUT when set): raw output goes there - build.txt, tests.txt
# (pytest -rA), junit.xml, nvidia-smi.txt, commit.txt and one JSON file per
# issue-22 check (loader_streams, cuda_graph, nvml_memory; written by
# tests/gpu/test_torch_hardening.py before it asserts; nvml_memory.json holds
# the driver reserve measured per process), and gpu-out.tar.gz, one tar of all
# of them (a device machine returns few files). The whole run is bounded by
# $ARKGPU_GPU_TIMEOUT seconds (default 285).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUTDIR=${OUT:-}
BENCH=no
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUTDIR=$2; shift 2 ;;
        --bench) BENCH=yes; shift ;;
        *) break ;;
    esac
done
# One tar of everything under --out, written however the run ends.
pack_out() {
    [ -n "$OUTDIR" ] || return 0
    local tmp
    tmp=$(mktemp) || return 0
    if tar -czf "$tmp" -C "$OUTDIR" --exclude=./gpu-out.tar.gz . 2>/dev/null; then
        mv "$tmp" "$OUTDIR/gpu-out.tar.gz" && chmod 0644 "$OUTDIR/gpu-out.tar.gz"
    else
        rm -f "$tmp"
    fi
}
if [ -n "$OUTDIR" ]; then
    mkdir -p "$OUTDIR" || exit 1
    OUTDIR=$(cd "$OUTDIR" && pwd)
    export ARKGPU_GPU_OUT="$OUTDIR"
    git rev-parse HEAD > "$OUTDIR/commit.txt" 2>/dev/null || echo "no git" > "$OUTDIR/commit.txt"
    nvidia-smi > "$OUTDIR/nvidia-smi.txt" 2>&1
    "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, torch.version.cuda)" \
        > "$OUTDIR/python.txt" 2>&1
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu: NOT RUN - no NVIDIA GPU visible (nvidia-smi -L failed)"
    pack_out
    exit 77
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "tests/gpu: NOT RUN - PyTorch with CUDA is not importable by $PY"
    pack_out
    exit 77
fi
BUILD_LOG=${OUTDIR:+$OUTDIR/build.txt}
make -C src/arkgpu/limiter/native > "${BUILD_LOG:-/dev/stdout}" 2>&1 || { echo "tests/gpu: build failed"; pack_out; exit 1; }
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -rA tests/gpu)
if [ -n "$OUTDIR" ]; then
    PYTEST+=(--junitxml "$OUTDIR/junit.xml")
fi
if [ "$BENCH" = no ]; then
    if [ -n "$OUTDIR" ]; then
        ARKGPU_GPU_TESTS=1 timeout "${ARKGPU_GPU_TIMEOUT:-285}" "${PYTEST[@]}" "$@" 2>&1 | tee "$OUTDIR/tests.txt"
        status=${PIPESTATUS[0]}
        pack_out
        exit "$status"
    fi
    ARKGPU_GPU_TESTS=1 exec timeout "${ARKGPU_GPU_TIMEOUT:-285}" "${PYTEST[@]}" "$@"
fi
ARKGPU_GPU_TESTS=1 "${PYTEST[@]}" || exit 1
exec "$PY" -m tests.gpu.bench_limiter "$@"
