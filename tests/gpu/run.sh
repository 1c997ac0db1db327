#!/usr/bin/env bash
# Real-GPU checks of the resource limiter with PyTorch. Run from the repository
# root:  tests/gpu/run.sh [PYTEST ARGS] | tests/gpu/run.sh --bench [--json PATH]
# It builds the native parts with gcc alone (no virtual environment needed, so
# it also runs on a GPU machine without network). Python: $PYTHON, else
# .venv/bin/python, else python3; src/ is put on PYTHONPATH. As root the
# PyTorch children run as nobody, so the checkout must be readable by nobody.
# Exit status: 0 all passed, 1 a failure, 77 not run (no GPU or no PyTorch) -
# a "not run" is printed as such and is never a pass. With --bench, the tests
# are followed by tests/gpu/bench_limiter.py (figures to stdout and --json).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu: NOT RUN - no NVIDIA GPU visible (nvidia-smi -L failed)"
    exit 77
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "tests/gpu: NOT RUN - PyTorch with CUDA is not importable by $PY"
    exit 77
fi
BENCH=no
if [ "${1:-}" = "--bench" ]; then
    BENCH=yes
    shift
fi
make -s -C src/arkgpu/limiter/native || exit 1
if [ "$BENCH" = no ]; then
    ARKGPU_GPU_TESTS=1 exec "$PY" -m pytest -q -p no:cacheprovider tests/gpu "$@"
fi
ARKGPU_GPU_TESTS=1 "$PY" -m pytest -q -p no:cacheprovider tests/gpu || exit 1
exec "$PY" -m tests.gpu.bench_limiter "$@"
