"""Where the built native parts live, and the environment that loads them.

The package build (setup.py, run by ``pip install``, ``pip wheel`` and
``pip install -e``) runs the native Makefile; its outputs lie in
``arkgpu/limiter/native/build`` next to this module: in site-packages for an
installed wheel, in the source tree for an editable install (where
``make native`` rebuilds them after a change to the C sources).

``ARKGPU_NATIVE_DIR`` names another directory of the same layout instead: for
example a copy made by :func:`stage` that container processes running as
another user can reach when the install cannot be (a checkout or a virtual
environment under root's home directory, mode 0700).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

#: Environment variable naming a directory of built native parts to use.
NATIVE_DIR_ENV = "ARKGPU_NATIVE_DIR"

#: The native Makefile's outputs, relative to its build directory.
BUILT_FILES = (
    "libarkgpu_limiter.so",
    "libarkgpu_client.so",
    "fake/libcuda.so.1",
    "fake/libnvidia-ml.so.1",
    "arkgpu-cubench",
    "arkgpu-layout",
    "arkgpu-linked-probe",
    "fake/arkgpu-fake-escape",
)


def build_dir() -> Path:
    """The directory holding the built parts: ``$ARKGPU_NATIVE_DIR`` when set,
    else ``native/build`` next to this module."""
    override = os.environ.get(NATIVE_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parent / "native" / "build"


def _built(relative: str) -> Path:
    path = build_dir() / relative
    if not path.exists():
        if os.environ.get(NATIVE_DIR_ENV):
            raise FileNotFoundError(f"{path} not found (${NATIVE_DIR_ENV} points there)")
        raise FileNotFoundError(
            f"{path} is not built: run `make native` in a checkout, or reinstall arkgpu"
        )
    return path


def stage(dest: Path) -> Path:
    """Copy the built parts into ``dest``, every directory and file readable
    and traversable by every user; return ``dest``, a value for
    ``ARKGPU_NATIVE_DIR``. The parents of ``dest`` must be traversable too."""
    sources = [(relative, _built(relative)) for relative in BUILT_FILES]
    for relative, source in sources:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        target.chmod(0o755)
    for directory in {(dest / relative).parent for relative in BUILT_FILES}:
        directory.chmod(0o755)
    return dest


def limiter_library() -> Path:
    """The interception library to put in LD_PRELOAD."""
    return _built("libarkgpu_limiter.so")


def client_library() -> Path:
    """The LC latency channel's C library."""
    return _built("libarkgpu_client.so")


def fake_driver_dir() -> Path:
    """Directory holding the fake libcuda.so.1 and libnvidia-ml.so.1."""
    return _built("fake/libcuda.so.1").parent


def cubench() -> Path:
    """The driver client used by the tests and the benchmark."""
    return _built("arkgpu-cubench")


def linked_probe() -> Path:
    """A client linked against libcuda.so.1 at build time (interposition test)."""
    return _built("arkgpu-linked-probe")


def layout_printer() -> Path:
    """The program that prints the C region layout as JSON."""
    return _built("arkgpu-layout")


def container_env(
    region_dir: Path | None,
    fake_state: Path,
    *,
    preload: bool = True,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for a process of a container on the fake GPU.

    ``region_dir`` None leaves ARKGPU_REGION_DIR out; ``preload`` False runs
    the process on the fake driver without the limiter (the overhead baseline).
    """
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = str(fake_driver_dir())
    env["FAKEGPU_STATE"] = str(fake_state)
    env.pop("LD_PRELOAD", None)
    env.pop("ARKGPU_REGION_DIR", None)
    if preload:
        env["LD_PRELOAD"] = str(limiter_library())
    if region_dir is not None:
        env["ARKGPU_REGION_DIR"] = str(region_dir)
    return env
