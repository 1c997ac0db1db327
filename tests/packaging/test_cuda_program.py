"""The user's CUDA program of the plain workload image (deploy/image/cuda-program):
built without a CUDA toolkit and without linking a libcuda, it opens the driver it
finds at run time; on the fake GPU under the limiter it sees the cap, is refused
past it and runs at its share.

Needs gcc (as the native build does).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import Limits, native
from arkgpu.limiter.containers import FakeContainer, make_world_readable

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "deploy/image/cuda-program/cuda_program.c"
MIB = 1 << 20


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """The program and the native build where the container user can run them."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-cuda-program-"))
    make_world_readable(path)
    subprocess.run(
        ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-o",
         str(path / "cuda-program"), str(SOURCE), "-ldl"],
        check=True, timeout=120,
    )  # fmt: skip
    (path / "cuda-program").chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(native.NATIVE_DIR_ENV, str(native.stage(path / "native")))
        yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(box: FakeContainer, workdir: Path, *args: str) -> tuple[int, dict[str, object]]:
    proc = box.popen([str(workdir / "cuda-program"), *args])
    out, err = proc.communicate(timeout=120)
    assert out, err
    return proc.returncode, json.loads(out)


def test_the_program_links_no_cuda_library(workdir: Path) -> None:
    """Built with gcc alone: its dynamic section names libc only, no libcuda."""
    needed = subprocess.run(
        ["readelf", "-d", str(workdir / "cuda-program")], capture_output=True, text=True, check=True
    ).stdout
    libraries = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "NEEDED" in line]
    assert not [name for name in libraries if "cuda" in name]
    assert "libc.so.6" in libraries


def test_without_a_driver_it_says_so_in_one_line(workdir: Path) -> None:
    """No libcuda.so.1 in the container: one line, exit status 1."""
    done = subprocess.run(
        [str(workdir / "cuda-program"), "info"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(workdir)},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("cuda-program: no CUDA driver in this container")
    assert done.stderr.count("\n") == 1


def test_under_the_limiter_it_sees_the_cap_is_refused_past_it_and_runs_at_its_share(
    workdir: Path,
) -> None:
    """3,000 MiB and 30 %: cuMemGetInfo reports 3,000 MiB; 2,000 MiB is granted,
    3,001 refused with out-of-memory (exit 2); kernels back to back run near 30 %."""
    limits = Limits((3000 * MIB,), share_bp=3000)
    box = FakeContainer.create(workdir / "region", workdir / "fakegpu", limits)
    assert _run(box, workdir, "info") == (0, {"free_mib": 3000, "total_mib": 3000})
    assert _run(box, workdir, "alloc", "2000") == (0, {"mib": 2000, "result": "ok"})
    assert _run(box, workdir, "alloc", "3001") == (2, {"mib": 3001, "result": "out_of_memory"})
    status, busy = _run(box, workdir, "busy", "3", "2000")
    assert status == 0
    assert 0.2 < float(busy["busy_share"]) < 0.4, busy  # type: ignore[arg-type]
    assert int(busy["launches"]) > 100  # type: ignore[call-overload]
