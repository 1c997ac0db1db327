"""Calibrating the level-1 intervals on held-out folds, and checking their coverage.

Each held-out solo point of four splits is predicted by the fold's predictor
and labelled with the kind of query it was for that predictor
(:meth:`arkgpu.predictor.Predictor.confidence`): leave-one-batch-out and
leave-one-share-out give ``measured-range`` points (held-out value inside the
training range) and ``extrapolated`` ones (outside), leave-one-model-out gives
``new-model`` points (one anchor point, :mod:`arkgpu.predictor.anchoring`) and
cross-gpu gives ``cross-gpu`` points. A kind's interval is the 5th and 95th
percentile of ``log(measured / predicted)`` over its points.

Coverage is measured without the points it is scored on: for each DNN model,
the interval is recomputed from the other models' points of the same kind and
the model's own points are checked against it; a kind's coverage pools those
checks (nominal 90%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arkgpu.predictor.anchoring import pick_anchor
from arkgpu.predictor.confidence import KINDS
from arkgpu.predictor.predicting import Predictor
from arkgpu.predictor.splitting import SPLITS
from arkgpu.traces.profiles import SoloRecord

LOW_QUANTILE = 5.0
"""Percentile of the interval's lower end."""
HIGH_QUANTILE = 95.0
"""Percentile of the interval's upper end (nominal coverage 90%)."""
MIN_POINTS = 10
"""Fewest held-out points of a kind for its interval to be calibrated (else left as is)."""


@dataclass(frozen=True, slots=True)
class Residual:
    """One held-out level-1 prediction."""

    kind: str
    model: str
    log_ratio: float
    """log(measured / predicted)."""


@dataclass(frozen=True)
class Calibration:
    """Intervals per kind and their held-out coverage."""

    intervals: dict[str, tuple[float, float]]
    coverage: dict[str, float]
    """Fraction of held-out points inside the interval calibrated without their model."""
    counts: dict[str, int]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; intervals also as percentages of the prediction."""
        return {
            kind: {
                "log_interval": list(self.intervals[kind]),
                "low_pct": 100.0 * (np.exp(self.intervals[kind][0]) - 1.0),
                "high_pct": 100.0 * (np.exp(self.intervals[kind][1]) - 1.0),
                "coverage": self.coverage.get(kind),
                "count": self.counts.get(kind, 0),
            }
            for kind in self.intervals
        }


def _scored(predictor: Predictor, test: Sequence[SoloRecord]) -> list[Residual]:
    out = []
    for r in test:
        if not predictor.knows(r.model):
            continue
        c = predictor.confidence(r.model, r.batch, r.share, r.gpu)
        out.append(Residual(c.kind, r.model, float(np.log(r.latency_ms / c.latency_ms))))
    return out


def _new_model(solo: Sequence[SoloRecord], model: str) -> list[Residual]:
    others = [r for r in solo if r.model != model]
    if not others:
        return []
    base = Predictor.fit(others)
    out = []
    for gpu in sorted({r.gpu for r in solo if r.model == model}):
        mine = [r for r in solo if r.model == model and r.gpu == gpu]
        anchor = pick_anchor(mine)
        guess = base.with_model(model, anchor.batch, anchor.share, anchor.latency_ms, gpu)
        out += _scored(guess, [r for r in mine if r is not anchor])
    return out


def held_out_residuals(solo: Sequence[SoloRecord]) -> list[Residual]:
    """Held-out residuals of every kind from the four splits (see the module docstring)."""
    out: list[Residual] = []
    for name in ("leave-one-batch-out", "leave-one-share-out", "cross-gpu"):
        for fold in SPLITS[name](solo, [], 0):
            if fold.solo_train and fold.solo_test:
                out += _scored(Predictor.fit(fold.solo_train), fold.solo_test)
    for model in sorted({r.model for r in solo}):
        out += _new_model(solo, model)
    return out


def _bounds(values: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(values, [LOW_QUANTILE, HIGH_QUANTILE])
    return float(min(low, 0.0)), float(max(high, 0.0))


def calibrate(residuals: Sequence[Residual], start: dict[str, tuple[float, float]]) -> Calibration:
    """Intervals from ``residuals`` (kinds with too few points keep ``start``), and coverage."""
    intervals, coverage, counts = dict(start), {}, {}
    for kind in KINDS:
        mine = [r for r in residuals if r.kind == kind]
        counts[kind] = len(mine)
        if len(mine) < MIN_POINTS:
            continue
        values = np.array([r.log_ratio for r in mine])
        intervals[kind] = _bounds(values)
        models = np.array([r.model for r in mine])
        inside = []
        for model in sorted(set(models)):
            rest = values[models != model]
            if len(rest) < MIN_POINTS:
                continue
            low, high = _bounds(rest)
            own = values[models == model]
            inside += ((own >= low) & (own <= high)).tolist()
        if inside:
            coverage[kind] = float(np.mean(inside))
    return Calibration(intervals, coverage, counts)
