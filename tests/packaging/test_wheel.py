"""The wheel: built from what a fresh clone holds (nothing made by hand), it
carries the limiter's native parts under a platform tag, never binaries that
lay in the source tree; installed alone into a fresh virtual environment it
runs the node and scheduler code without the benchmark extras, and with them
runs ``arkgpu limiter bench --quick``.

These tests need git (the clone's file list), gcc, make and PyPI (or pip's
cache) for the build requirements and dependencies.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter.native import BUILT_FILES, NATIVE_DIR_ENV

pytestmark = pytest.mark.wheel

REPO = Path(__file__).resolve().parents[2]
NATIVE_IN_WHEEL = "arkgpu/limiter/native/build/"
NATIVE_IN_TREE = Path("src/arkgpu/limiter/native/build")

#: Modules that need the ``bench`` extra (matplotlib, scikit-learn): the
#: command line (it loads every command group), the benchmarks, plotting and
#: the predictor's evaluation against learned baselines. Every other module is
#: what a GPU node or a scheduler may import, with the core dependencies only.
BENCH_ONLY = (
    "arkgpu.cli",
    "arkgpu.bench",
    "arkgpu.limiter.benchmarking",
    "arkgpu.predictor.baselines",
    "arkgpu.predictor.evaluating",
    "arkgpu.predictor.plotting",
)

#: Modules that need the ``k8s`` extra (the Kubernetes client, gRPC,
#: prometheus-client): the cluster adapters, which only the Kubernetes
#: daemons import.
K8S_ONLY = ("arkgpu.k8s.",)

#: Imports every arkgpu module but those under the prefixes given as
#: arguments; prints as JSON the ones that failed and the benchmark libraries
#: that the others loaded.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import arkgpu
skip = tuple(sys.argv[1:])
failed = {}
for info in pkgutil.walk_packages(arkgpu.__path__, "arkgpu."):
    if not info.name.startswith(skip):
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = repr(exc)
loaded = sorted(m for m in ("matplotlib", "sklearn") if m in sys.modules)
print(json.dumps({"failed": failed, "loaded": loaded}))
"""


def _run(args: list[str], cwd: Path, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in (NATIVE_DIR_ENV, "PYTHONPATH")}
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _fresh_clone(dest: Path) -> Path:
    """Copy the files a clone of this checkout holds (tracked, and new files
    git does not ignore) into ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.fail(f"the wheel tests copy a clone's files with git: {listed.stderr.decode()}")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _build_wheel(tree: Path, out: Path) -> Path:
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(tree)], out)
    (wheel,) = out.glob("*.whl")
    return wheel


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _native_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            name.removeprefix(NATIVE_IN_WHEEL): archive.read(name)
            for name in archive.namelist()
            if name.startswith(NATIVE_IN_WHEEL)
        }


@pytest.fixture(scope="module")
def reachable_tmp() -> Iterator[Path]:
    """A temporary directory every user can traverse: when the tests run as
    root, the bench's container processes run as nobody and load the native
    parts from the virtual environment made here."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-wheel-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(reachable_tmp: Path) -> Path:
    """The wheel built from a fresh copy of the clone's files."""
    tree = _fresh_clone(reachable_tmp / "clone")
    assert not (tree / NATIVE_IN_TREE).exists()
    (reachable_tmp / "dist").mkdir()
    return _build_wheel(tree, reachable_tmp / "dist")


@pytest.mark.timeout(900)
def test_wheel_carries_the_native_parts_under_a_platform_tag(wheel: Path) -> None:
    """The wheel is tagged py3-none-<this platform> (machine code, no CPython
    extension) and holds every output of the native Makefile as an ELF file,
    the programs executable."""
    assert wheel.name.endswith(f"-py3-none-{_platform_tag()}.whl"), wheel.name
    members = _native_members(wheel)
    assert sorted(members) == sorted(BUILT_FILES)
    assert all(data.startswith(b"\x7fELF") for data in members.values())
    with zipfile.ZipFile(wheel) as archive:
        mode = archive.getinfo(NATIVE_IN_WHEEL + "arkgpu-cubench").external_attr >> 16
    assert mode & 0o111 == 0o111


@pytest.mark.timeout(900)
def test_binaries_in_the_source_tree_never_reach_the_wheel(reachable_tmp: Path) -> None:
    """A tree where native/build already holds files (an earlier `make native`,
    another machine's or a sanitizer build) gives a wheel whose native parts
    are built afresh: none of the planted bytes, nothing beyond the outputs."""
    tree = _fresh_clone(reachable_tmp / "stale")
    planted = tree / NATIVE_IN_TREE
    for name in (*BUILT_FILES, "extra.so"):
        (planted / name).parent.mkdir(parents=True, exist_ok=True)
        (planted / name).write_bytes(b"stale: not built by this build\n")
    (reachable_tmp / "stale-dist").mkdir()
    members = _native_members(_build_wheel(tree, reachable_tmp / "stale-dist"))
    assert sorted(members) == sorted(BUILT_FILES)
    assert all(data.startswith(b"\x7fELF") for data in members.values())


@pytest.mark.timeout(900)
def test_wheel_alone_in_a_fresh_environment_runs_the_limiter_bench(
    wheel: Path, reachable_tmp: Path
) -> None:
    """Installed alone, the wheel pulls in neither matplotlib nor scikit-learn,
    and every module but the benchmarks' and the Kubernetes adapters' loads
    without them; with the bench and k8s extras every module loads, and
    `arkgpu limiter bench --quick` finds the native parts in site-packages and
    reports finite figures."""
    env = reachable_tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = str(env / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", str(wheel)], reachable_tmp, timeout=600)
    core_only = [*BENCH_ONLY, *K8S_ONLY]
    imported = json.loads(_run([python, "-c", IMPORT_ALL, *core_only], reachable_tmp))
    assert imported == {"failed": {}, "loaded": []}
    _bench_without_the_plots_extra(env / "bin" / "arkgpu", reachable_tmp)

    extras = f"{wheel}[bench,k8s]"
    _run([python, "-m", "pip", "install", "-q", extras], reachable_tmp, timeout=600)
    imported = json.loads(_run([python, "-c", IMPORT_ALL], reachable_tmp))
    assert imported["failed"] == {}
    _assert_bench_report(env / "bin" / "arkgpu", reachable_tmp / "bench.json")


def _assert_bench_report(arkgpu: Path, out: Path) -> None:
    """``arkgpu limiter bench --quick`` writes finite figures to ``out``."""
    _run([str(arkgpu), "limiter", "bench", "--quick", "--json", str(out)], out.parent)
    report = json.loads(out.read_text())
    for key in ("launch_overhead_ns", "share_error_pts_max", "share_change_latency_ms"):
        assert math.isfinite(report[key]), key


def _bench_without_the_plots_extra(arkgpu: Path, tmp: Path) -> None:
    """The core install runs the limiter bench; asked for a figure, it names the
    plots extra in one line (exit status 69), no traceback."""
    _assert_bench_report(arkgpu, tmp / "core-bench.json")
    done = subprocess.run(
        [str(arkgpu), "limiter", "bench", "--quick", "--plot", str(tmp / "bench.png")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 69, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "pip install 'arkgpu[plots]'" in done.stderr
