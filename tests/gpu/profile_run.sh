#!/usr/bin/env bash
# The GPU profiling run (issue 27 item 1), for a session with a lent NVIDIA GPU; it cannot
# run on a machine without one (no GPU, PyTorch or torchvision: exit 77, nothing measured).
# Runs `arkgpu profile run` with the default plan (4 torchvision models alone at 4 batches x
# 4 shares, their 6 pairs at 3 share splits; expected about 6.5 minutes on one GPU, see
# docs/PROFILING.md) on GPU 0 under the ArkGPU limiter, then `arkgpu predictor fit` and
# `arkgpu predictor eval` (random, leave-one-model-out, leave-one-batch-out) on the profiles.
# Run from anywhere:  tests/gpu/profile_run.sh --out DIR [arkgpu profile run options]
# Python: $PYTHON, else .venv/bin/python, else python3 (with numpy, scipy, rich and the
# project's other core dependencies, plus torch and torchvision); src/ on PYTHONPATH.
# Under DIR: profiles/ (the run's folder: *_solo.csv, *_pairs.csv, *_stats.csv, SOURCE.md,
# run.json, points/, logs/), progress.txt, run.txt, predictor.json, eval-<split>.json/.txt,
# nvidia-smi.txt, build.txt, commit.txt. The run stops after $ARKGPU_PROFILE_TIMEOUT seconds
# (default 540, inside a 10-minute command); it resumes: run the same command again to
# finish the points left (exit 124 says it timed out).
# As root the workers run as nobody: the checkout, DIR's parents and the Python packages
# must be readable by nobody (the workers fall back to /usr/bin/python3 with our sys.path
# when nobody cannot run $PYTHON).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUTDIR=""
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUTDIR=$2; shift 2 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
if [ -z "$OUTDIR" ]; then
    echo "profile_run.sh: --out DIR is required" >&2
    exit 2
fi
mkdir -p "$OUTDIR" || exit 1
chmod 755 "$OUTDIR"
git rev-parse HEAD > "$OUTDIR/commit.txt" 2>/dev/null || echo "no git" > "$OUTDIR/commit.txt"
if ! nvidia-smi > "$OUTDIR/nvidia-smi.txt" 2>&1; then
    echo "profile_run.sh: no NVIDIA GPU here (nvidia-smi failed); nothing measured" >&2
    exit 77
fi
if ! "$PY" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
    echo "profile_run.sh: $PY has no PyTorch/torchvision with CUDA; nothing measured" >&2
    exit 77
fi
if ! make -C src/arkgpu/limiter/native > "$OUTDIR/build.txt" 2>&1; then
    echo "profile_run.sh: building the limiter failed (see $OUTDIR/build.txt)" >&2
    exit 1
fi
timeout "${ARKGPU_PROFILE_TIMEOUT:-540}" "$PY" -m arkgpu profile run --backend torch \
    --out "$OUTDIR/profiles" "${ARGS[@]}" 2> >(tee -a "$OUTDIR/progress.txt" >&2) \
    | tee -a "$OUTDIR/run.txt"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo "profile_run.sh: the profiling run ended with status $status (rerun to resume)" >&2
    exit "$status"
fi
"$PY" -m arkgpu predictor fit --profiles "$OUTDIR/profiles" --out "$OUTDIR/predictor.json" \
    | tee "$OUTDIR/fit.txt" || exit 1
for split in random leave-one-model-out leave-one-batch-out; do
    "$PY" -m arkgpu predictor eval --profiles "$OUTDIR/profiles" --split "$split" \
        --json "$OUTDIR/eval-$split.json" > "$OUTDIR/eval-$split.txt" 2>&1 \
        || echo "profile_run.sh: predictor eval --split $split failed (see eval-$split.txt)" >&2
done
cat "$OUTDIR"/eval-*.txt
