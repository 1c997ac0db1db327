"""Where the built native parts live, and the environment that loads them.

``make native`` builds them into ``arkgpu/limiter/native/build`` next to this
package (an editable install finds them there).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def build_dir() -> Path:
    """The directory ``make native`` builds into."""
    return Path(__file__).resolve().parent / "native" / "build"


def _built(relative: str) -> Path:
    path = build_dir() / relative
    if not path.exists():
        raise FileNotFoundError(f"{path} is not built: run `make native`")
    return path


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
