"""Level 1 for a model never profiled: other models' curves, rescaled to one measurement.

A latency formula is homogeneous in its time parameters: multiplying
``fixed_ms`` and ``work_ms`` by ``a`` multiplies every latency by ``a``. So
each profiled model's curve, rescaled to pass through the new model's one
measured point ``(batch, share, latency)``, is a guess at the new model's
curve. The guess used is their geometric mean over a grid of batches and
shares, refitted as a :class:`~arkgpu.predictor.curves.SoloCurve` (so it is
monotone and saves like any other curve).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.traces.profiles import SoloRecord

GRID_BATCHES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
"""Batches of the grid the rescaled curves are averaged on (the profiles' usual range)."""
GRID_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Shares of that grid."""


def rescaled(curve: SoloCurve, batch: float, share: float, latency_ms: float) -> SoloCurve:
    """``curve`` with its time parameters scaled so that it passes through the given point."""
    factor = latency_ms / curve.latency_ms(batch, share)
    return replace(curve, fixed_ms=curve.fixed_ms * factor, work_ms=curve.work_ms * factor)


def anchored_curve(
    references: Sequence[SoloCurve], batch: int, share: float, latency_ms: float
) -> SoloCurve:
    """A curve for a new model from one measured point and other models' curves."""
    if not references:
        raise ValueError("no profiled model to borrow a curve shape from")
    grid_b, grid_s = np.meshgrid(np.array(GRID_BATCHES), np.array(GRID_SHARES))
    b, s = grid_b.ravel(), grid_s.ravel()
    logs = [np.log(rescaled(c, batch, share, latency_ms).latency_ms_many(b, s)) for c in references]
    mean = np.exp(np.mean(logs, axis=0))
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
