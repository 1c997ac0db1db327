"""GPU tests run only through tests/gpu/run.sh (which sets ARKGPU_GPU_TESTS=1);
the default pytest run does not collect them, so a machine without a GPU never
counts them as passed or skipped."""

import os

collect_ignore_glob = [] if os.environ.get("ARKGPU_GPU_TESTS") == "1" else ["test_*.py"]
