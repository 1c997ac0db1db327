"""Level-1 fitting: recovers a known curve, interpolates and extrapolates sensibly."""

from __future__ import annotations

import numpy as np

from arkgpu.predictor.curves import SoloCurve, fit_curve

TRUE = SoloCurve(
    fixed_ms=0.8,
    work_ms=0.35,
    work_offset=1.5,
    parallelism=0.04,
    extra_offset=6.0,
    sharpness=3.0,
    overlap=1.0,
)


def _grid(batches: list[int], shares: list[float]) -> tuple[np.ndarray, np.ndarray]:
    b, s = np.meshgrid(np.array(batches, dtype=np.float64), np.array(shares))
    return b.ravel(), s.ravel()


def test_fit_recovers_a_known_curve_from_noisy_points() -> None:
    """Points of a known curve with 2% noise: held-out points predicted within 3% on average."""
    rng = np.random.default_rng(7)
    batch, share = _grid([1, 2, 4, 8, 16, 32], [0.2, 0.4, 0.6, 0.8, 1.0])
    noisy = TRUE.latency_ms_many(batch, share) * rng.lognormal(0.0, 0.02, batch.size)
    curve = fit_curve(batch, share, noisy)
    between_b, between_s = _grid([3, 6, 12, 24], [0.3, 0.5, 0.7, 0.9])
    truth = TRUE.latency_ms_many(between_b, between_s)
    error = np.abs(curve.latency_ms_many(between_b, between_s) / truth - 1)
    assert error.mean() < 0.03


def test_extrapolation_grows_like_the_work() -> None:
    """Beyond the measured batches latency grows about linearly in batch; below the measured
    shares it grows about as 1/share (the formula's limits, not a flat line)."""
    batch, share = _grid([1, 2, 4, 8, 16, 32], [0.2, 0.4, 0.6, 0.8, 1.0])
    curve = fit_curve(batch, share, TRUE.latency_ms_many(batch, share))
    ratio_batch = curve.latency_ms(256, 1.0) / curve.latency_ms(128, 1.0)
    assert 1.8 < ratio_batch < 2.05
    ratio_share = curve.latency_ms(32, 0.05) / curve.latency_ms(32, 0.1)
    assert 1.8 < ratio_share < 2.05


def test_fit_on_one_batch_size_stays_finite_and_monotone() -> None:
    """Four points at a single batch (MIGProfiler's sequence-length rows): a usable curve."""
    share = np.array([1 / 7, 2 / 7, 3 / 7, 1.0])
    batch = np.full(4, 32.0)
    latency = np.array([90.6, 45.9, 31.9, 14.3])
    curve = fit_curve(batch, share, latency)
    predicted = curve.latency_ms_many(batch, share)
    assert np.all(np.abs(predicted / latency - 1) < 0.1)
    assert curve.latency_ms(64, 0.5) >= curve.latency_ms(32, 0.5)


def test_activity_is_the_batch_elasticity_of_the_latency() -> None:
    """Activity is d ln latency / d ln batch: low while fixed costs and idle SMs absorb a
    bigger batch, near 1 once the GPU is saturated and latency is per-sample work."""
    for batch in (1, 4, 16, 64, 512):
        wider = TRUE.latency_ms(batch * 1.01, 1.0) / TRUE.latency_ms(batch / 1.01, 1.0)
        elasticity = np.log(wider) / np.log(1.01**2)
        assert abs(TRUE.activity(batch, 1.0) - elasticity) < 0.01
    assert TRUE.activity(1, 1.0) < 0.3
    assert TRUE.activity(512, 1.0) > 0.95
    host_bound = SoloCurve(50.0, 0.01, 0.0, 0.5, 0.0, 3.0, 1.0)
    assert host_bound.activity(8, 1.0) < 0.01


def test_level2_parts_are_activity_occupancy_and_duty_in_one_pass() -> None:
    """The one-pass answer level 2 uses equals the three separate ones (to rounding), with
    the overlap exponent above 1 too (host work partly hidden behind the GPU's)."""
    hidden = SoloCurve(0.8, 0.35, 1.5, 0.04, 6.0, 3.0, 2.5)
    for curve in (TRUE, hidden):
        for batch, share in ((1, 1.0), (8, 0.3), (64, 0.55), (512, 0.1)):
            expected = (curve.activity(batch, share), *curve.occupancy_duty(batch, share))
            assert np.allclose(curve.level2_parts(batch, share), expected, rtol=1e-9, atol=0)
