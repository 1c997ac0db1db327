"""A borrowed curve reshaped to what the references' trend expects of a new model.

:mod:`arkgpu.predictor.anchoring` borrows a new model's curve from the profiled
models, rescaled through its one measured point. A rescaling keeps the
references' split between fixed time (launch, copies, host work) and GPU
time, but a model smaller than every reference is more fixed-time-bound than
any of them (on iGniter's V100, alexnet's latency grows 3.8x from batch 1 to
16, resnet50's 5.7x, ssd's 11x). Across the references such a shape figure
follows their latency at the point, so a line through (log latency, figure)
gives the new model's; the curve then moves time between its fixed and GPU
parts, keeping the measured point, until it has that figure. Two figures:

- ``elasticity``: the batch elasticity at the point, ``d ln latency / d ln
  batch`` (:meth:`~arkgpu.predictor.curves.SoloCurve.activity`);
- ``small batches``: ``ln(latency at batch 1 / latency at the point)`` at the
  point's share.

Which one (or none) serves a new model is chosen by leave-one-out over the
references (:func:`arkgpu.predictor.anchoring.anchored_curve`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from scipy.optimize import brentq

from arkgpu.predictor.curves import SoloCurve

LOG_FACTOR_FLOOR = -8.0
"""Smallest log factor on the fixed time tried (e**-8: none)."""
Figure = Callable[[SoloCurve, int, float], float]
"""A shape figure of a curve at (batch, share)."""
Reshape = Callable[[SoloCurve, Sequence[SoloCurve], int, float, float], SoloCurve]
"""``reshape(curve, references, batch, share, latency_ms)``."""


def elasticity(curve: SoloCurve, batch: int, share: float) -> float:
    """Batch elasticity of the latency at (batch, share), in [0, 1]."""
    return curve.activity(batch, share)


def small_batches(curve: SoloCurve, batch: int, share: float) -> float:
    """``ln(latency at batch 1 / latency at batch)``, at ``share`` (<= 0)."""
    return math.log(curve.latency_ms(1.0, share) / curve.latency_ms(batch, share))


def expected(
    figure: Figure, references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> float:
    """The new model's ``figure``, by a line through the references' (figure against log
    latency at the same batch and share)."""
    x = np.log([c.latency_ms(batch, share) for c in references])
    y = np.array([figure(c, batch, share) for c in references])
    if np.ptp(x) <= 0:
        return float(np.mean(y))
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept + slope * math.log(latency_ms))


def expected_elasticity(
    references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> float:
    """:func:`expected` :func:`elasticity`, clipped to [0, 1]."""
    found = expected(elasticity, references, batch, share, latency_ms)
    return float(np.clip(found, 0.0, 1.0))


def with_fixed(
    curve: SoloCurve, batch: int, share: float, latency_ms: float, log_factor: float
) -> SoloCurve:
    """``curve`` with ``fixed_ms`` times ``exp(log_factor)`` and the GPU part rescaled so
    that it passes through the point (the factor must leave the GPU part some time)."""
    m = curve.overlap
    fixed = curve.fixed_ms * math.exp(log_factor)
    gpu_now = (curve.latency_ms(batch, share) ** m - curve.fixed_ms**m) ** (1.0 / m)
    room = max(latency_ms**m - fixed**m, 0.0) ** (1.0 / m)
    return replace(curve, fixed_ms=fixed, work_ms=curve.work_ms * room / gpu_now)


def _matched(
    curve: SoloCurve, point: tuple[int, float, float], figure: Figure, target: float
) -> SoloCurve:
    """``curve`` through ``point`` with the fixed time whose ``figure`` is ``target`` (the
    nearest end of the range when none is)."""
    batch, share, latency_ms = point
    m = curve.overlap
    if curve.fixed_ms <= 0 or curve.latency_ms(batch, share) ** m <= curve.fixed_ms**m:
        return curve
    low, high = LOG_FACTOR_FLOOR, math.log(latency_ms / curve.fixed_ms) - 1e-6

    def gap(x: float) -> float:
        return figure(with_fixed(curve, batch, share, latency_ms, x), batch, share) - target

    ends = (gap(low), gap(high))
    if ends[0] * ends[1] > 0:
        return with_fixed(
            curve, batch, share, latency_ms, low if abs(ends[0]) < abs(ends[1]) else high
        )
    return with_fixed(curve, batch, share, latency_ms, brentq(gap, low, high, xtol=1e-6))


def matched_elasticity(
    curve: SoloCurve, references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> SoloCurve:
    """``curve`` with the batch elasticity :func:`expected_elasticity` at the point
    (unchanged when it has no fixed part or no GPU part to move time between)."""
    target = expected_elasticity(references, batch, share, latency_ms)
    return _matched(curve, (batch, share, latency_ms), elasticity, target)


def matched_small_batches(
    curve: SoloCurve, references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> SoloCurve:
    """``curve`` with the :func:`small_batches` figure the references' trend expects
    (unchanged at batch 1, where the figure is 0 for every curve)."""
    if batch <= 1:
        return curve
    target = min(expected(small_batches, references, batch, share, latency_ms), 0.0)
    return _matched(curve, (batch, share, latency_ms), small_batches, target)


def borrowed(
    curve: SoloCurve, references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> SoloCurve:
    """``curve`` as borrowed (no reshaping)."""
    del references, batch, share, latency_ms
    return curve


RESHAPES: dict[str, Reshape] = {
    "borrowed": borrowed,
    "elasticity": matched_elasticity,
    "small batches": matched_small_batches,
}
"""The reshapings a new model's curve may take, the plain borrowed one first (kept on ties)."""
