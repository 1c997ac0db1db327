"""``python3 scripts/imagebuild``: build ArkGPU's image archive (``make image``).

Prints the archive's path as its last line. Options: ``--out PATH`` (default
``dist/arkgpu-image-<version>.tar``), ``--cache DIR`` (default
``~/.cache/arkgpu/image``), ``--cuda-program``: build the plain image of the CUDA
program instead (``make cuda-image``; default ``dist/arkgpu-cuda-program-<version>.tar``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from imagebuild.building import Paths, build, build_cuda_image
from imagebuild.spec import SpecError, load

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    """Parse the options, build, print the path."""
    parser = argparse.ArgumentParser(prog="imagebuild", description=__doc__)
    parser.add_argument("--out", type=Path, help="the archive to write")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/arkgpu/image")
    parser.add_argument("--cuda-program", action="store_true", help="the CUDA program's image")
    args = parser.parse_args()
    try:
        spec = load(REPO)
        kind = "cuda-program" if args.cuda_program else "image"
        out = (args.out or REPO / "dist" / f"arkgpu-{kind}-{spec.tag}.tar").resolve()
        steps = build_cuda_image if args.cuda_program else build
        path = steps(Paths(REPO, args.cache, out), spec)
    except (SpecError, OSError, subprocess.CalledProcessError) as exc:
        print(f"imagebuild: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
