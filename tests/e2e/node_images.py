"""A small workload image for the real node's tests, packed from this machine's own files.

It holds ``/bin/sh``, ``sleep`` and the project's CUDA driver client ``arkgpu-cubench`` with
the C libraries they load (found with ``ldd``), and no GPU driver: the driver
comes from the node through CDI, as with NVIDIA's toolkit. Packed as an OCI
archive by ``scripts/imagebuild/pack.py`` (the packer the node build uses).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from arkgpu.limiter import native

from .controlplane import REPO

WORKLOAD_IMAGE = "arkgpu.local/e2e-cuda-workload:test"
"""The image's name in the node's containerd."""
PACKER = REPO / "scripts" / "imagebuild" / "pack.py"


def _libraries(binary: Path) -> list[Path]:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    return [Path(p) for p in re.findall(r"(/\S+) \(0x", out)]


def build_workload_image(
    out_dir: Path, image: str = WORKLOAD_IMAGE, extra: Sequence[Path] = ()
) -> Path:
    """The archive (``<out_dir>/workload.tar``) of ``image``: the programs above and the
    ``extra`` files of this machine, each at its own path."""
    programs = {
        Path("/bin/sh").resolve(): "/bin/sh",
        Path("/bin/sleep").resolve(): "/bin/sleep",
        native.cubench(): "/usr/bin/arkgpu-cubench",
    }
    files = dict(programs) | {p.resolve(): str(p) for p in extra}
    for program in programs:
        for lib in _libraries(program):
            files.setdefault(lib.resolve(), str(lib))
    archive = out_dir / "workload.tar"
    pairs = [f"{src}={dest}" for src, dest in files.items()]
    subprocess.run(
        [sys.executable, str(PACKER), str(archive), image, "/bin/sh", *pairs], check=True
    )
    return archive
