"""Shared fixtures: where the project's measured data lies, small traces."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/data``: the measured source files, as published (see data/README.md)."""
    path = REPO / "data"
    if not path.is_dir():
        pytest.fail(f"measured source data not found at {path} (it is part of the repository)")
    return path
