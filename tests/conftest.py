"""Shared fixtures: where the project's measured data lies, small traces."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the repository (CI lays a copy there)."""
    path = REPO.parent / "shared" / "data"
    if not path.is_dir():
        pytest.fail(f"measured data not found at {path}; CI and developers have it there")
    return path
