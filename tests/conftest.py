"""Shared fixtures: where the project's measured data lies, small traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests are reproducible: the default profile draws the same examples on every run
# (derandomize), so a run cannot pass by luck, and keeps no local example database that CI
# would not have; a failure found once is replayed with @example in its test. Set
# HYPOTHESIS_PROFILE=explore to search with fresh random examples (and a local database).
settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/data``: the measured source files, as published (see data/README.md)."""
    path = REPO / "data"
    if not path.is_dir():
        pytest.fail(f"measured source data not found at {path} (it is part of the repository)")
    return path
