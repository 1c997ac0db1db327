"""Fixtures of the DRA driver's tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import make_world_readable


@pytest.fixture
def workdir() -> Iterator[Path]:
    """Short paths (Unix sockets) the container user (nobody, as root) can reach."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-dra-"))
    make_world_readable(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def staged_native(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The native build copied where the container user can load it (the checkout
    may be under a directory of mode 0700, as a clone in /root)."""
    staged = native.stage(workdir / "native")
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(staged))
    return staged
