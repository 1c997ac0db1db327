"""Small clusters and traces for placement tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.placement_helpers import write_small_trace


@pytest.fixture
def small_trace(tmp_path: Path) -> tuple[Path, Path]:
    """Paths of the small node and pod CSVs."""
    return write_small_trace(tmp_path)
