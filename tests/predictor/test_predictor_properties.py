"""Invariants over random inputs: level 1 is monotone, level 2 never speeds a workload up."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.predictor import Predictor, Workload
from arkgpu.predictor.curves import LOWER, UPPER, SoloCurve, fit_curve
from arkgpu.predictor.interference import FEATURE_NAMES, Interference, Usage

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


def _parameter(index: int) -> st.SearchStrategy[float]:
    high = min(float(UPPER[index]), 1e3)
    return st.floats(float(LOWER[index]), high, allow_nan=False, allow_infinity=False)


curves = st.builds(SoloCurve, *(_parameter(i) for i in range(len(LOWER))))
batches = st.integers(1, 512)
shares = st.floats(0.01, 1.0)


@PROPERTY_SETTINGS
@given(curves, batches, st.integers(0, 256), shares, shares)
def test_any_curve_is_monotone(
    curve: SoloCurve, batch: int, more: int, share_a: float, share_b: float
) -> None:
    """For every parameter inside the fit's bounds: more share never slower, bigger batch
    never faster (up to float rounding)."""
    low, high = sorted((share_a, share_b))
    assert curve.latency_ms(batch, high) <= curve.latency_ms(batch, low) * (1 + 1e-9)
    assert curve.latency_ms(batch + more, low) >= curve.latency_ms(batch, low) * (1 - 1e-9)
    assert 0.0 <= curve.activity(batch, low) <= 1.0 + 1e-12


def test_fitted_curves_are_monotone_on_a_grid(fitted: Predictor) -> None:
    """Every fitted (GPU, model) curve, on a dense grid far beyond the measured range."""
    share = np.linspace(0.01, 1.0, 100)
    batch = np.arange(1, 1025, dtype=np.float64)
    for curve in fitted.curves.values():
        grid = curve.latency_ms_many(batch[:, None], share[None, :])
        assert np.all(np.diff(grid, axis=1) <= 1e-9 * grid[:, 1:])
        assert np.all(np.diff(grid, axis=0) >= -1e-9 * grid[1:, :])
        assert np.all(np.isfinite(grid))
        assert np.all(grid > 0)


usages = st.builds(
    Usage,
    share=shares,
    activity=st.floats(0.0, 1.0),
    l2=st.one_of(st.none(), st.floats(0.0, 1.0)),
    dram=st.one_of(st.none(), st.floats(0.0, 1.0)),
)


@PROPERTY_SETTINGS
@given(
    st.sampled_from(sorted(FEATURE_NAMES)),
    st.lists(st.floats(0.0, 10.0), min_size=5, max_size=5),
    usages,
    st.lists(usages, max_size=4),
    usages,
)
def test_slowdown_is_at_least_one_and_grows_with_corunners(
    kind: str, theta: list[float], target: Usage, corunners: list[Usage], extra: Usage
) -> None:
    """Any non-negative coefficients: slowdown >= 1, and one more co-runner never lowers it."""
    model = Interference(kind, tuple(theta[: len(FEATURE_NAMES[kind])]))
    before = model.slowdown(target, corunners)
    assert before >= 1.0
    assert model.slowdown(target, [*corunners, extra]) >= before


workloads = st.builds(
    Workload,
    model=st.sampled_from(["alexnet", "resnet50", "vgg19", "ssd"]),
    batch=st.integers(1, 64),
    share=st.floats(0.05, 1.0),
)


@PROPERTY_SETTINGS
@given(workloads, st.lists(workloads, max_size=3))
def test_fitted_colocated_latency_is_never_below_alone(
    fitted: Predictor, target: Workload, corunners: list[Workload]
) -> None:
    """The fitted predictor: co-located latency >= latency alone, on the V100 and on a GPU
    whose pairs were never measured (pooled fit)."""
    for gpu in ("V100", "A100-80GB"):
        alone = fitted.latency_ms(target.model, target.batch, target.share, gpu)
        assert fitted.colocated_latency_ms(target, corunners, gpu) >= alone


@settings(max_examples=25, deadline=None, derandomize=True)
@given(curves, st.integers(0, 2**32 - 1), st.integers(3, 40))
def test_fitting_any_curves_points_gives_a_finite_curve(
    truth: SoloCurve, seed: int, points: int
) -> None:
    """Fitting noisy points of any curve in bounds raises no warning (warnings are errors here)
    and returns a curve that is finite and reproduces the points' scale."""
    rng = np.random.default_rng(seed)
    batch = rng.integers(1, 129, points).astype(np.float64)
    share = rng.uniform(0.05, 1.0, points)
    latency = truth.latency_ms_many(batch, share) * rng.lognormal(0.0, 0.05, points)
    fitted = fit_curve(batch, share, latency)
    predicted = fitted.latency_ms_many(batch, share)
    assert np.all(np.isfinite(predicted))
    assert np.median(np.abs(np.log(predicted / latency))) < 0.5


@PROPERTY_SETTINGS
@given(st.lists(st.tuples(workloads, st.sampled_from(["V100", "A100-80GB", "H100"])), min_size=1))
def test_vectorised_equals_scalar_on_random_queries(
    fitted: Predictor, queries: list[tuple[Workload, str]]
) -> None:
    """latency_ms_many agrees with latency_ms query by query, on profiled and other GPUs."""
    for gpu in {g for _, g in queries}:
        mine = [w for w, g in queries if g == gpu]
        many = fitted.latency_ms_many(
            [w.model for w in mine], [w.batch for w in mine], [w.share for w in mine], gpu
        )
        one = [fitted.latency_ms(w.model, w.batch, w.share, gpu) for w in mine]
        np.testing.assert_allclose(many, one, rtol=1e-12)
