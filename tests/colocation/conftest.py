"""Fixtures of the co-location tests: the ground truth, the sizer and tiny scenarios."""

from __future__ import annotations

import pytest

from arkgpu.colocation.sizing import ShareSizer
from arkgpu.sim.colocation.running import default_truth, make_sizer
from arkgpu.sim.colocation.truth import GroundTruth
from colocation.colocation_helpers import FakePredictor


@pytest.fixture(scope="session")
def truth() -> GroundTruth:
    """Ground truth from the shipped iGniter V100 profiles."""
    return default_truth()


@pytest.fixture(scope="session")
def sizer() -> ShareSizer:
    """Share sizing over the predictor fitted on the shipped profiles."""
    return make_sizer()


@pytest.fixture
def fake_sizer() -> ShareSizer:
    """Sizing over :class:`colocation_helpers.FakePredictor`."""
    return ShareSizer(FakePredictor())
