"""Level 1 for a model never profiled: other models' curves, rescaled to one measurement.

A latency formula is homogeneous in its time parameters: multiplying
``fixed_ms`` and ``work_ms`` by ``a`` multiplies every latency by ``a``. So
each profiled model's curve, rescaled to pass through the new model's one
measured point ``(batch, share, latency)``, is a guess at the new model's
curve. The guess used is their geometric mean over a grid of batches and
shares, refitted as a :class:`~arkgpu.predictor.curves.SoloCurve` (so it is
monotone and saves like any other curve).

The mean is weighted by how alike each profiled model is to the new one at
the measured point: ``w = exp(-gap**2 / (2 * width**2))`` with
``gap = log(reference latency / measured latency)`` there (a model of a
similar size at that batch and share tends to have a similar shape: small
models are host-bound, large ones compute-bound). ``width`` is chosen among
:data:`WIDTHS` by leave-one-out over the references themselves: each
reference's curve is predicted on the grid from the others through its own
latency at the same point, and the width with the smallest mean log error
wins (no data of the new model beyond the one point is used).

The borrowed curve is then reshaped as the references' trend expects of a
model of its latency (:mod:`arkgpu.predictor.shaping`: a small model is more
fixed-time-bound than larger references), with the reshaping, or none, that
predicts the references from each other best by the same leave-one-out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.predictor.shaping import RESHAPES, Reshape
from arkgpu.traces.profiles import SoloRecord

GRID_BATCHES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
"""Batches of the grid the rescaled curves are averaged on (the profiles' usual range)."""
GRID_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Shares of that grid."""


def rescaled(curve: SoloCurve, batch: float, share: float, latency_ms: float) -> SoloCurve:
    """``curve`` with its time parameters scaled so that it passes through the given point."""
    factor = latency_ms / curve.latency_ms(batch, share)
    return replace(curve, fixed_ms=curve.fixed_ms * factor, work_ms=curve.work_ms * factor)


WIDTHS = (0.25, 0.5, 1.0, 2.0, math.inf)
"""Widths (log units) of the similarity weights tried; inf weighs every reference alike."""


def _grid() -> tuple[FloatArray, FloatArray]:
    grid_b, grid_s = np.meshgrid(np.array(GRID_BATCHES), np.array(GRID_SHARES))
    return grid_b.ravel(), grid_s.ravel()


def _weighted_logs(
    references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float, width: float
) -> FloatArray:
    """Weighted mean log latency on the grid of the references rescaled through the point."""
    b, s = _grid()
    logs = [np.log(rescaled(c, batch, share, latency_ms).latency_ms_many(b, s)) for c in references]
    gaps = np.array([math.log(c.latency_ms(batch, share) / latency_ms) for c in references])
    weights = np.exp(-0.5 * (gaps / width) ** 2) if math.isfinite(width) else np.ones(len(gaps))
    if not weights.sum() > 0:
        weights = np.ones(len(gaps))
    result: FloatArray = np.average(logs, axis=0, weights=weights)
    return result


def choose_width(references: Sequence[SoloCurve], batch: int, share: float) -> float:
    """The width of :data:`WIDTHS` that best predicts each reference from the others."""
    if len(references) < 3:
        return math.inf
    b, s = _grid()
    errors = []
    for width in WIDTHS:
        total = 0.0
        for i, held in enumerate(references):
            rest = [c for j, c in enumerate(references) if j != i]
            guess = _weighted_logs(rest, batch, share, held.latency_ms(batch, share), width)
            total += float(np.mean(np.abs(guess - np.log(held.latency_ms_many(b, s)))))
        errors.append(total)
    return WIDTHS[int(np.argmin(errors))]


def anchored_curve(
    references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> SoloCurve:
    """A curve for a new model from one measured point and other models' curves: the
    borrowed shape, reshaped as the references' trend expects where that helps them
    (module docstring)."""
    curve = _borrowed(references, batch, share, latency_ms)
    if len(references) < MIN_MATCHED:
        return curve
    return _best_reshape(references, batch, share)(curve, references, batch, share, latency_ms)


def _borrowed(
    references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> SoloCurve:
    """The references rescaled through the point, weighted by similarity, refitted."""
    if not references:
        raise ValueError("no profiled model to borrow a curve shape from")
    b, s = _grid()
    width = choose_width(references, batch, share)
    mean = np.exp(_weighted_logs(references, batch, share, latency_ms, width))
    anchor_b = np.append(b, float(batch))
    anchor_s = np.append(s, share)
    return fit_curve(anchor_b, anchor_s, np.append(mean, latency_ms))


def pick_anchor(records: Sequence[SoloRecord]) -> SoloRecord:
    """The one point a new model is assumed measured at: the batch nearest the middle of its
    batches on a log scale (a typical serving batch), at the largest share measured there."""
    if not records:
        raise ValueError("no records to pick an anchor from")
    middle = float(np.median(np.log([r.batch for r in records])))
    batch = min({r.batch for r in records}, key=lambda b: (abs(np.log(b) - middle), b))
    return max((r for r in records if r.batch == batch), key=lambda r: r.share)


MIN_MATCHED = 3
"""Fewest references for a reshaping (its leave-one-out fits a line through two)."""


def _best_reshape(references: Sequence[SoloCurve], batch: int, share: float) -> Reshape:
    """The reshaping of :data:`~arkgpu.predictor.shaping.RESHAPES` that predicts each
    reference from the others (through its own latency at the point) best on the grid, in
    mean absolute log error."""
    b, s = _grid()
    errors = dict.fromkeys(RESHAPES, 0.0)
    for i, held in enumerate(references):
        rest = [c for j, c in enumerate(references) if j != i]
        latency = held.latency_ms(batch, share)
        truth = np.log(held.latency_ms_many(b, s))
        base = _borrowed(rest, batch, share, latency)
        for name, reshape in RESHAPES.items():
            guess = reshape(base, rest, batch, share, latency).latency_ms_many(b, s)
            errors[name] += float(np.mean(np.abs(np.log(guess) - truth)))
    return RESHAPES[min(errors, key=lambda name: errors[name])]
