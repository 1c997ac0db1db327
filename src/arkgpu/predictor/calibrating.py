"""Level 2's interval ends: split-conformal, conditional on the measured slowdown bin.

A level-2 interval is on ``log(measured / guarded)`` and is taken from
out-of-fold targets (:mod:`arkgpu.predictor.guarding`). A plain 5th-95th
percentile interval holds 90% of them overall but fewer of the contended
pairs (their misses are all above) and more of the mild ones (misses all
below), so the ends here must hold a nominal share of the targets overall
*and* of every measured-strength bin of at least :data:`MIN_BIN` of them
(:func:`interval_ends`), with the split-conformal finite-sample correction
(:func:`misses_allowed`).

The nominal share is not taken as 90% on faith: out-of-fold errors cluster by
DNN model (a model held out is slowed unlike the others in a way its
neighbours in the calibration set do not show), so ends that hold 90% of the
calibration targets hold fewer of a new model's. :func:`choose_levels` picks
the nominal share, per region, among :data:`LEVELS` (90% or more) by
cross-validating the calibration itself: each unit of the out-of-fold targets
(a model, or a random fold) is covered by ends found on the targets that share
no group with it, and the level whose coverage per measured bin is nearest
:data:`COVERAGE` wins (scored per region on the targets that region's
interval holds: the clustering differs between mild and contended pairs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.breakdown import STRENGTH_EDGES

IntArray = NDArray[np.int_]
BoolArray = NDArray[np.bool_]
COVERAGE = 0.9
"""Target coverage of an interval, overall and in every measured-strength bin."""
LEVELS = tuple(round(COVERAGE + 0.01 * i, 2) for i in range(8))
"""Nominal shares :func:`choose_level` tries (0.90 ... 0.97): never below :data:`COVERAGE`,
whose split-conformal guarantee holds where the errors are exchangeable; raised where
cross-validation shows they are not."""
MIN_BIN = 10
"""Fewest targets of a measured-strength bin for it to constrain the ends."""
MIN_UNITS = 5
"""Fewest cross-validation units for :func:`choose_level` to choose; with fewer (a set of
four models leaves three in training) the inner calibration rests on two of three models
and understates coverage, so the level stays :data:`COVERAGE`."""
MIN_SCORED = 30
"""Fewest cross-validated targets of a measured-strength bin for it to count in
:func:`choose_level` (the bins a held-out evaluation counts)."""


def strength_bins(ratios: FloatArray) -> IntArray:
    """Index of each co-located / solo ratio's strength bin (as
    :func:`arkgpu.predictor.breakdown.strength_label`, 0 the mildest)."""
    found: IntArray = np.searchsorted(np.array(STRENGTH_EDGES), ratios, side="right")
    return found


def misses_allowed(count: int, level: float = COVERAGE) -> int:
    """Targets of ``count`` a split-conformal interval of ``level`` may leave out: it holds
    the ``ceil((count + 1) level)``-th smallest score."""
    return max(count - math.ceil((count + 1) * level - 1e-9), 0)


def _highs(ordered: FloatArray, lows: FloatArray, allowed: int) -> FloatArray:
    """Per low end, the smallest upper end (>= 0) leaving at most ``allowed`` of the
    ascending ``ordered`` outside (infinite when more than that lie below already)."""
    left = allowed - np.searchsorted(ordered, lows, side="left")
    index = np.clip(len(ordered) - 1 - left, 0, len(ordered) - 1)
    highs = np.where(left >= len(ordered), 0.0, np.maximum(ordered[index], 0.0))
    result: FloatArray = np.where(left < 0, np.inf, highs)
    return result


def interval_ends(logs: FloatArray, bins: IntArray, level: float = COVERAGE) -> tuple[float, float]:
    """The narrowest ``(low, high)``, ``low <= 0 <= high``, leaving out at most
    :func:`misses_allowed` of ``logs`` overall and in each bin of ``bins`` (strength bin
    per target) holding at least :data:`MIN_BIN` of them."""
    crowded = [bins == b for b in np.unique(bins) if np.sum(bins == b) >= MIN_BIN]
    groups = [np.sort(logs)] + [np.sort(logs[m]) for m in crowded]
    lows = np.unique(np.append(np.minimum(logs, 0.0), 0.0))
    highs = np.max([_highs(g, lows, misses_allowed(len(g), level)) for g in groups], axis=0)
    best = int(np.lexsort((lows, highs - lows))[0])
    return float(lows[best]), float(highs[best])


Calibrate = Callable[[BoolArray], Callable[[float, BoolArray], BoolArray]]
"""``calibrate(train_mask)`` -> ``inside(level, test_mask)``: which test targets the ends
found on the train targets at ``level`` hold."""


def _deviation(inside: BoolArray, bins: IntArray) -> float:
    parts = [inside] + [inside[bins == b] for b in np.unique(bins)]
    scored = [p for p in parts if len(p) >= MIN_SCORED]
    return max((abs(float(p.mean()) - COVERAGE) for p in scored), default=math.inf)


def choose_level(
    units: Sequence[tuple[BoolArray, BoolArray]], bins: IntArray, calibrate: Calibrate
) -> float:
    """The level of :data:`LEVELS` whose cross-validated coverage is nearest
    :data:`COVERAGE` in the worst measured bin (the lower level on a tie; :data:`COVERAGE`
    with fewer than :data:`MIN_UNITS` units that can be calibrated). ``units`` are
    ``(test, train)`` masks."""
    scopes = np.zeros(len(bins), dtype=np.int_)
    return choose_levels(units, bins, scopes, calibrate).get(0, COVERAGE)


def choose_levels(
    units: Sequence[tuple[BoolArray, BoolArray]],
    bins: IntArray,
    scopes: NDArray[Any],
    calibrate: Calibrate,
) -> dict[Any, float]:
    """:func:`choose_level` per scope (``scopes``: one key per target, such as the region
    whose interval holds it), each scored on its own cross-validated targets."""
    usable = [(test, train) for test, train in units if test.any() and train.any()]
    if len(usable) < MIN_UNITS:
        return {}
    tested = np.concatenate([bins[test] for test, _ in usable])
    where = np.concatenate([scopes[test] for test, _ in usable])
    inside: list[list[BoolArray]] = [[] for _ in LEVELS]
    for test, train in usable:
        judge = calibrate(train)
        for held, level in zip(inside, LEVELS, strict=True):
            held.append(judge(level, test))
    flags = [np.concatenate(h) for h in inside]
    levels = {}
    for scope in np.unique(where).tolist():
        mask = where == scope
        best = min(
            (_deviation(f[mask], tested[mask]), v) for f, v in zip(flags, LEVELS, strict=True)
        )
        if math.isfinite(best[0]):
            levels[scope] = best[1]
    return levels
