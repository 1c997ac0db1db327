"""A new model profiled at a few points of its own: which points, and its curve from them.

``arkgpu predictor eval --split leave-one-model-out --new-model-points BxS``
asks how many measurements a model needs before level 1 predicts the rest of
its profile well: each model held out is fitted on B batches times S shares of
its own records only (:func:`pick_design`), as ``predictor fit`` would fit a
model profiled at just those points, instead of from one point borrowing the
other models' shape (:mod:`arkgpu.predictor.anchoring`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.traces.profiles import SoloRecord


def _spread(values: Sequence[float], count: int) -> list[float]:
    """``count`` values evenly spaced over the sorted ``values`` (by position), ends first."""
    ordered = sorted(set(values))
    if count == 1:
        return [ordered[len(ordered) // 2]]
    last = len(ordered) - 1
    return [ordered[round(i * last / (count - 1))] for i in range(count)]


def pick_design(records: Sequence[SoloRecord], batches: int, shares: int) -> list[SoloRecord]:
    """The records a model would be profiled at: ``batches`` batches evenly spaced over its
    measured batches (the middle one for 1) times ``shares`` shares evenly spaced over its
    measured shares (the largest for 1), at each batch the measured share nearest each
    (duplicates once)."""
    if not records:
        raise ValueError("no records to pick profiled points from")
    all_shares = [r.share for r in records]
    levels = [max(all_shares)] if shares == 1 else _spread(all_shares, shares)
    chosen: dict[int, SoloRecord] = {}
    for batch in _spread([r.batch for r in records], batches):
        at_batch = [r for r in records if r.batch == batch]
        for share in levels:
            record = min(at_batch, key=lambda r: (abs(r.share - share), -r.share))
            chosen[id(record)] = record
    return list(chosen.values())


def own_curve(records: Sequence[SoloRecord]) -> SoloCurve:
    """The model's level-1 curve fitted on ``records`` alone (as ``predictor fit`` does)."""
    batch = np.array([r.batch for r in records], dtype=np.float64)
    share = np.array([r.share for r in records], dtype=np.float64)
    return fit_curve(batch, share, np.array([r.latency_ms for r in records], dtype=np.float64))
