"""Fixtures of the node runtime's tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import make_world_readable


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder every user (nobody too) can reach, with a copy of the native build in it."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-node-"))
    make_world_readable(path)
    native.stage(path / "native")
    yield path
    shutil.rmtree(path, ignore_errors=True)
