"""A small workload image for the real node's tests, packed from this machine's own files.

It holds ``/bin/sh``, ``sleep`` and the project's CUDA driver client ``arkgpu-cubench`` with
the C libraries they and the limiter load (found with ``ldd``), and no GPU driver: the driver
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
    # The limiter comes from the node; the C libraries it needs (libdl, libpthread: its
    # symbol versions are pinned to old glibc, where they live there) are in every glibc
    # image, so they are in this one too.
    for program in (*programs, native.limiter_library()):
        for lib in _libraries(program):
            files.setdefault(lib.resolve(), str(lib))
    archive = out_dir / "workload.tar"
    pairs = [f"{src}={dest}" for src, dest in files.items()]
    subprocess.run(
        [sys.executable, str(PACKER), str(archive), image, "/bin/sh", *pairs], check=True
    )
    return archive


OLD_ROOTFS_SCRIPT = REPO / "scripts" / "build-old-rootfs.sh"
OLD_SUITE = "bullseye"
"""Debian 11: glibc 2.31, as Ubuntu 20.04 (buster is no longer served by the mirror)."""
OLD_LIBS = ("libc.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libm.so.6")
"""The old root's C libraries the image holds (all the programs and the limiter need)."""
CUBENCH_SOURCE = Path(native.__file__).resolve().parent / "native" / "cubench.c"


def old_rootfs() -> Path:
    """The Debian root of :data:`OLD_SUITE` (scripts/build-old-rootfs.sh: cached after the
    first build, a minute or two from this machine's Debian mirror)."""
    done = subprocess.run(
        ["bash", str(OLD_ROOTFS_SCRIPT), OLD_SUITE], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(done.stdout.strip().splitlines()[-1])


def _in_root(rootfs: Path, path: str) -> Path:
    """``path`` of the old root resolved inside it (its links are relative)."""
    resolved = (rootfs / path.lstrip("/")).resolve()
    assert rootfs.resolve() in resolved.parents, f"{path} leaves {rootfs}: {resolved}"
    return resolved


def build_old_glibc_image(out_dir: Path, rootfs: Path, image: str) -> Path:
    """The archive (``<out_dir>/old-glibc.tar``) of ``image``: the old root's ``sh`` (dash),
    ``sleep``, loader and C libraries, and ``arkgpu-cubench`` built against that glibc
    (``gcc --sysroot``). The GPU driver and the limiter come from the node, as in
    :func:`build_workload_image`."""
    program = out_dir / "cubench-old"
    subprocess.run(
        ["gcc", f"--sysroot={rootfs}", f"-B{rootfs}/usr/lib/x86_64-linux-gnu", "-O2",
         "-pthread", "-o", str(program), str(CUBENCH_SOURCE), "-ldl"],
        check=True,
    )  # fmt: skip
    lib = "/lib/x86_64-linux-gnu"
    files = {
        _in_root(rootfs, "/bin/dash"): "/bin/sh",
        _in_root(rootfs, "/bin/sleep"): "/bin/sleep",
        _in_root(rootfs, "/lib64/ld-linux-x86-64.so.2"): "/lib64/ld-linux-x86-64.so.2",
        program: "/usr/bin/arkgpu-cubench",
    } | {_in_root(rootfs, f"{lib}/{name}"): f"{lib}/{name}" for name in OLD_LIBS}
    archive = out_dir / "old-glibc.tar"
    pairs = [f"{src}={dest}" for src, dest in files.items()]
    subprocess.run(
        [sys.executable, str(PACKER), str(archive), image, "/bin/sh", *pairs], check=True
    )
    return archive
