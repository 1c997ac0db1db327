#!/usr/bin/env bash
# Real-GPU checks of the resource limiter with PyTorch. Run from the repository
# root after `make native`:  tests/gpu/run.sh
# Exit status: 0 all passed, 1 a failure, 77 not run (no GPU or no PyTorch) -
# a "not run" is printed as such and is never a pass.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu: NOT RUN - no NVIDIA GPU visible (nvidia-smi -L failed)"
    exit 77
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "tests/gpu: NOT RUN - PyTorch with CUDA is not importable by $PY"
    exit 77
fi
make -s native || exit 1
ARKGPU_GPU_TESTS=1 "$PY" -m pytest -q -p no:cacheprovider tests/gpu "$@"
