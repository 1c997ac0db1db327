"""Level 1 for a model never profiled: the borrowed shape reshaped to the references' trend."""

from __future__ import annotations

import math

import pytest

from arkgpu.predictor.anchoring import anchored_curve
from arkgpu.predictor.curves import SoloCurve
from arkgpu.predictor.evaluating import evaluate
from arkgpu.predictor.shaping import (
    expected,
    expected_elasticity,
    matched_elasticity,
    matched_small_batches,
    small_batches,
)
from arkgpu.traces.profiles import default_profile_dir, load_solo_profiles


def _curve(fixed_ms: float, work_ms: float) -> SoloCurve:
    return SoloCurve(fixed_ms, work_ms, 0.5, 0.05, 1.0, 2.0, 1.5)


REFERENCES = [_curve(2.0, 0.5), _curve(2.0, 1.0), _curve(2.0, 2.0), _curve(2.0, 4.0)]
"""Same fixed time, more work: the longer the latency, the larger the batch elasticity."""


def test_expected_elasticity_follows_the_references_trend_beyond_them() -> None:
    """A model faster than every reference is expected less elastic than all of them, a
    slower one more (the line through their elasticity against log latency, extrapolated),
    within [0, 1]."""
    fastest = min(c.latency_ms(16, 0.8) for c in REFERENCES)
    expected = expected_elasticity(REFERENCES, 16, 0.8, fastest / 2)
    assert 0.0 <= expected < min(c.activity(16, 0.8) for c in REFERENCES)
    slowest = max(c.activity(16, 0.8) for c in REFERENCES)
    assert slowest < expected_elasticity(REFERENCES, 16, 0.8, 1e12) <= 1.0


def test_matched_curve_passes_through_the_point_with_the_expected_elasticity() -> None:
    """Time moves between the fixed and the GPU part: the curve keeps the measured point and
    takes the expected elasticity there, so a small model's small batches are not
    under-predicted as a plain rescaling of larger models does."""
    point = (16, 0.8, 3.0)
    plain = REFERENCES[0]
    scale = point[2] / plain.latency_ms(16, 0.8)
    rescaled = SoloCurve(plain.fixed_ms * scale, plain.work_ms * scale, 0.5, 0.05, 1.0, 2.0, 1.5)
    matched = matched_elasticity(rescaled, REFERENCES, *point)
    assert matched.latency_ms(16, 0.8) == pytest.approx(3.0, rel=1e-6)
    expected = expected_elasticity(REFERENCES, *point)
    assert matched.activity(16, 0.8) == pytest.approx(expected, abs=1e-3)
    assert matched.latency_ms(1, 0.8) > rescaled.latency_ms(1, 0.8)


def test_small_batches_take_the_ratio_the_references_trend_expects() -> None:
    """The batch-1 latency over the point's, on a log scale, follows the references' line;
    the point is kept; at batch 1 there is nothing to match."""
    point = (16, 0.8, 3.0)
    plain = REFERENCES[1]
    scale = point[2] / plain.latency_ms(16, 0.8)
    rescaled = SoloCurve(plain.fixed_ms * scale, plain.work_ms * scale, 0.5, 0.05, 1.0, 2.0, 1.5)
    matched = matched_small_batches(rescaled, REFERENCES, *point)
    assert matched.latency_ms(16, 0.8) == pytest.approx(3.0, rel=1e-6)
    target = expected(small_batches, REFERENCES, *point)
    assert small_batches(matched, 16, 0.8) == pytest.approx(min(target, 0.0), abs=1e-3)
    assert small_batches(matched, 16, 0.8) > small_batches(rescaled, 16, 0.8)
    assert matched_small_batches(rescaled, REFERENCES, 1, 0.8, 1.0) is rescaled


def test_a_curve_without_a_fixed_part_is_left_alone() -> None:
    no_fixed = _curve(0.0, 1.0)
    assert matched_elasticity(no_fixed, REFERENCES, 16, 0.8, 5.0) is no_fixed
    grown = anchored_curve(REFERENCES, 16, 0.8, 3.0)
    assert math.isfinite(grown.latency_ms(1, 0.1))


def test_leave_one_model_out_level1_on_igniter() -> None:
    """Issue 35, item 4: a model never profiled, predicted from one point at batch 16 and
    the 3 other iGniter models. Measured 5.08% MAPE (6.88% before the reshaping; the issue
    asks <= 5%, not met, docs/studies/predictor.md); the bound catches a return to the
    plain rescaling."""
    solo = [r for r in load_solo_profiles(default_profile_dir()) if r.gpu == "V100"]
    report = evaluate(solo, [], "leave-one-model-out").to_dict()
    assert 0 < report["level1"]["mape_pct"] <= 5.6  # type: ignore[index]
