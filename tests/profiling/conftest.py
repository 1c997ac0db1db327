"""Fixtures: a fake GPU of the test's own (state file, native build every user can reach)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import container_user, make_world_readable


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A folder the container user (nobody, when tests run as root) can reach."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-profiling-"))
    make_world_readable(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_env(workdir: Path) -> dict[str, str]:
    """Environment of an ``arkgpu profile run --backend fake`` process: its own fake GPU,
    and (as root) a copy of the native build that nobody can load."""
    env = dict(os.environ)
    env["FAKEGPU_STATE"] = str(workdir / "fakegpu")
    if container_user() is not None:
        env[native.NATIVE_DIR_ENV] = str(native.stage(workdir / "native"))
    env.pop("LD_PRELOAD", None)
    (workdir / "tmp").mkdir()
    make_world_readable(workdir / "tmp")
    env["TMPDIR"] = str(workdir / "tmp")  # a killed run's regions are removed with workdir
    env["COLUMNS"] = "200"
    return env
