"""Fixtures shared by the predictor's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.predictor import Predictor
from arkgpu.traces.profiles import default_profile_dir, load_pair_profiles, load_solo_profiles


@pytest.fixture(scope="session")
def shared_profiles() -> Path:
    """``<repo>/data/profiles``: the measured source files, as published (data/README.md)."""
    path = Path(__file__).resolve().parents[2] / "data" / "profiles"
    if not path.is_dir():
        pytest.fail(f"measured profiles not found at {path} (they are part of the repository)")
    return path


@pytest.fixture(scope="session")
def fitted() -> Predictor:
    """The predictor fitted on the shipped canonical profiles (fitted once per session)."""
    directory = default_profile_dir()
    return Predictor.fit(load_solo_profiles(directory), load_pair_profiles(directory))
