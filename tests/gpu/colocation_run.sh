#!/usr/bin/env bash
# The GPU co-location check (issue 24): a PyTorch inference server beside a PyTorch
# training loop on one GPU, with plain time-slicing and under the node runtime.
# Run from anywhere:  tests/gpu/colocation_run.sh --out DIR [colocation_torch options]
# Builds the limiter's native parts with gcc (no virtual environment needed), then runs
# python -m tests.gpu.colocation_torch (Python: $PYTHON, else .venv/bin/python, else
# python3; src/ on PYTHONPATH) under a timeout of $ARKGPU_COLOCATION_TIMEOUT seconds
# (default 230: the check takes about 2.5 minutes on an H200). Everything goes under
# --out: colocation.json, summary.txt, build.txt, nvidia-smi.txt, commit.txt, and one
# folder per mode with its logs. Exit status: the script's (0 done, 1 a run failed,
# 2 bad arguments, 77 not run: no GPU, PyTorch or torchvision), 124 timed out.
# As root the workloads run as nobody: the checkout and DIR's parents must be
# readable and traversable by nobody (not under /root).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUTDIR=""
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUTDIR=$2; ARGS+=("$1" "$2"); shift 2 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
if [ -z "$OUTDIR" ]; then
    echo "colocation_run.sh: --out DIR is required" >&2
    exit 2
fi
mkdir -p "$OUTDIR" || exit 1
git rev-parse HEAD > "$OUTDIR/commit.txt" 2>/dev/null || echo "no git" > "$OUTDIR/commit.txt"
nvidia-smi > "$OUTDIR/nvidia-smi.txt" 2>&1
if ! make -C src/arkgpu/limiter/native > "$OUTDIR/build.txt" 2>&1; then
    echo "colocation_run.sh: building the limiter failed (see $OUTDIR/build.txt)" >&2
    exit 1
fi
timeout "${ARKGPU_COLOCATION_TIMEOUT:-230}" "$PY" -m tests.gpu.colocation_torch "${ARGS[@]}"
