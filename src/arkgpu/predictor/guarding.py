"""Level 2 guarded: the contention model shrunk towards "no slowdown" where it is not trusted,
and level 2's calibrated intervals.

The contention model's form (:mod:`arkgpu.predictor.interference`) fits the data it
was shaped on; on pairs whose features do not tell a mild pair from a
contended one it predicts a large slowdown where the real one is small, worse
than assuming no interference at all (issue 35). So before the predictor
trusts it, it checks it on its own training targets, out of fold:

1. Out-of-fold slowdowns, one way per kind of level-2 query
   (:data:`arkgpu.predictor.confidence.PAIR_KINDS`): ``measured-pair``, :data:`FOLDS`
   folds of the co-located groups at random (the held-out targets' model
   combinations are mostly measured in the other folds, as for a query about
   models measured together); ``new-pair``, one fold per DNN model holding out
   every group with it (a model never measured next to its co-runners, as
   leave-one-model-out).
2. Regions by the contention model's own predicted slowdown ``s`` (known
   before anything is measured), cut at the strength edges
   (:data:`arkgpu.predictor.breakdown.STRENGTH_EDGES`). Per (kind, region) the
   guarded slowdown is ``1 + w (s - 1)`` with ``w`` among :data:`WEIGHTS`
   chosen on the out-of-fold targets (:func:`choose_weight`): of the weights
   whose MAPE is at most :data:`BIN_TOLERANCE_PCT` above no interference's
   (``w = 0``) in every measured-strength bin of at least :data:`MIN_BIN`
   targets (a target's measured strength is its co-located latency over its
   measured latency alone, :attr:`PairRows.strengths`: the bins issue 35 and
   ``predictor eval`` score, not the slowdown over level 1's latency alone),
   the one with the lowest MAPE, ``w = 1`` unless another beats it by
   :data:`KEEP_MARGIN_PCT`. A region with fewer than :data:`MIN_REGION` targets
   takes the weight chosen on every target of its kind (weak evidence: the
   pooled answer).
3. A (kind, region)'s interval on ``log(measured / guarded)`` over the same
   targets (pooled likewise), split-conformal and bin-conditional
   (:func:`arkgpu.predictor.calibrating.interval_ends`): the narrowest ends
   that hold a nominal share of those targets overall *and* of each
   measured-strength bin of at least :data:`MIN_BIN` of them. The nominal share
   (90% or more) is chosen per (kind, region) by cross-validating the
   calibration over the folds of step 1
   (:func:`arkgpu.predictor.calibrating.choose_levels`): out-of-fold errors
   cluster by model, so 90% of the calibration targets can be fewer of a new
   model's.
4. Where several GPUs' targets are fitted together, each GPU with at least
   :data:`MIN_REGION` of them also gets its own weights and intervals, steps 2
   and 3 on its targets only (a Mondrian split by GPU, keys ``GPU|region``):
   one interval per region served iGniter's mild V100 pairs and ParvaGPU's
   contended A100 groups alike, over-covering one and under-covering the other.

A query is ``measured-pair`` when every (GPU, target model, co-runner model)
combination of it was measured in training, else ``new-pair``; only
``measured-pair`` predictions are confident (the level-1 LC check keeps
headroom for the others, :mod:`arkgpu.placement.lc_placing`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import astuple, dataclass
from functools import partial

import numpy as np
from numpy.typing import NDArray

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.breakdown import STRENGTH_LABELS, strength_label
from arkgpu.predictor.calibrating import (
    COVERAGE,
    MIN_BIN,
    BoolArray,
    IntArray,
    choose_levels,
    interval_ends,
    strength_bins,
)
from arkgpu.predictor.confidence import PAIR_KINDS, Confidence
from arkgpu.predictor.pair_rows import PairRows, fit_level2, predict_rows

POOLED_REGION = "*"
"""Region key of the answer over all of a kind's targets."""
GPU_SEPARATOR = "|"
"""Between a GPU's name and a region in the key of that GPU's own shrink."""
WEIGHTS = tuple(i / 20 for i in range(21))
"""Weights of the contention model's extra slowdown tried (0: no interference)."""
FOLDS = 5
"""Random folds of the groups for ``measured-pair`` out-of-fold predictions."""
MIN_REGION = 30
"""Fewest out-of-fold targets for a region to get its own weight and interval."""
BIN_TOLERANCE_PCT = 0.5
"""How far (MAPE points) a weight may be above no interference in a bin."""
KEEP_MARGIN_PCT = 0.25
"""MAPE points another weight must gain over the unshrunk model (w = 1) to replace it."""


@dataclass(frozen=True, slots=True)
class Shrink:
    """The guard of one (kind, region)."""

    weight: float
    """Weight of the contention model's extra slowdown, in [0, 1]."""
    low: float
    """Lower end of the interval of log(measured / guarded), <= 0."""
    high: float
    """Upper end of the interval of log(measured / guarded), >= 0."""
    count: int
    """Out-of-fold targets it was chosen on."""


@dataclass(frozen=True)
class Guard:
    """Weights and intervals per (kind, region); empty: weight 1, no interval. A region key
    ``GPU|region`` is that GPU's own (its targets only, where several GPUs were fitted)."""

    shrinks: dict[tuple[str, str], Shrink]

    def find(self, kind: str, raw: float, gpu: str | None = None) -> Shrink | None:
        """The shrink of ``kind`` in the region of the contention slowdown ``raw``: the GPU's
        own region, the GPU's own pooled, the region over every GPU, the kind pooled, then
        the other kind (pooled)."""
        label = strength_label(raw)
        mine = () if gpu is None else (gpu + GPU_SEPARATOR + label, gpu + GPU_SEPARATOR + "*")
        for region in (*mine, label, POOLED_REGION):
            found = self.shrinks.get((kind, region))
            if found is not None:
                return found
        others = (self.shrinks.get((k, POOLED_REGION)) for k in PAIR_KINDS if k != kind)
        return next((s for s in others if s is not None), None)

    def slowdown(self, kind: str, raw: float, gpu: str | None = None) -> float:
        """The guarded slowdown, ``1 + w (raw - 1)``."""
        found = self.find(kind, raw, gpu)
        return raw if found is None else 1.0 + found.weight * (raw - 1.0)


def pair_interval(
    latency_ms: float, kind: str, shrink: Shrink | None, widen: tuple[float, float]
) -> Confidence:
    """``latency_ms`` of ``kind`` (one of :data:`PAIR_KINDS`) with ``shrink``'s interval (none:
    zero width) plus ``widen`` (log)."""
    low, high = (0.0, 0.0) if shrink is None else (shrink.low, shrink.high)
    low, high = low + min(widen[0], 0.0), high + max(widen[1], 0.0)
    return Confidence(latency_ms, latency_ms * math.exp(low), latency_ms * math.exp(high), kind)


def _ape(predicted: FloatArray, measured: FloatArray) -> FloatArray:
    result: FloatArray = np.abs(predicted / measured - 1.0) * 100.0
    return result


def choose_weight(raw: FloatArray, measured: FloatArray, bins: IntArray | None = None) -> float:
    """The weight of :data:`WEIGHTS` for out-of-fold slowdowns ``raw`` (module docstring);
    ``bins``: each target's measured-strength bin (default: that of ``measured``)."""
    bins = strength_bins(measured) if bins is None else bins
    apes = {w: _ape(1.0 + w * (raw - 1.0), measured) for w in WEIGHTS}
    crowded = [bins == b for b in np.unique(bins) if np.sum(bins == b) >= MIN_BIN]

    def allowed(w: float) -> bool:
        limits = (apes[0.0][m].mean() + BIN_TOLERANCE_PCT for m in crowded)
        return all(apes[w][m].mean() <= limit for m, limit in zip(crowded, limits, strict=True))

    feasible = [w for w in WEIGHTS if allowed(w)]
    best = min(feasible, key=lambda w: float(apes[w].mean()))
    if 1.0 in feasible and apes[1.0].mean() <= apes[best].mean() + KEEP_MARGIN_PCT:
        return 1.0
    return best


@dataclass(frozen=True)
class _Region:
    """One region's out-of-fold targets under its chosen weight."""

    weight: float
    logs: FloatArray
    """log(measured / guarded) per target."""
    bins: IntArray
    """Measured-strength bin per target."""

    @classmethod
    def of(cls, raw: FloatArray, measured: FloatArray, bins: IntArray) -> _Region:
        weight = choose_weight(raw, measured, bins)
        logs = np.log(measured / (1.0 + weight * (raw - 1.0)))
        return cls(weight, logs, bins)

    def shrink(self, level: float) -> Shrink:
        return Shrink(self.weight, *interval_ends(self.logs, self.bins, level), len(self.logs))


def _regions(raw: FloatArray, measured: FloatArray, bins: IntArray) -> dict[str, _Region]:
    """The pooled region and each region of at least :data:`MIN_REGION` targets (``bins``:
    each target's measured-strength bin)."""
    out = {POOLED_REGION: _Region.of(raw, measured, bins)}
    labels = strength_bins(raw)
    for label in np.unique(labels).tolist():
        mask = labels == label
        if np.sum(mask) >= MIN_REGION:
            out[STRENGTH_LABELS[label]] = _Region.of(raw[mask], measured[mask], bins[mask])
    return out


def _judge(
    raw: FloatArray, measured: FloatArray, bins: IntArray, train: BoolArray
) -> Callable[[float, BoolArray], BoolArray]:
    """Which test targets the shrinks found on the ``train`` targets at a level hold."""
    regions = _regions(raw[train], measured[train], bins[train])

    def inside(level: float, test: BoolArray) -> BoolArray:
        shrinks = {key: region.shrink(level) for key, region in regions.items()}
        labels = [STRENGTH_LABELS[b] for b in strength_bins(raw[test]).tolist()]
        found = [shrinks.get(label, shrinks[POOLED_REGION]) for label in labels]
        weights, lows, highs = (
            np.array(v) for v in zip(*((s.weight, s.low, s.high) for s in found), strict=True)
        )
        logs = np.log(measured[test] / (1.0 + weights * (raw[test] - 1.0)))
        result: BoolArray = (logs >= lows) & (logs <= highs)
        return result

    return inside


@dataclass(frozen=True)
class OutOfFold:
    """Out-of-fold slowdowns of one kind, with where each came from."""

    raw: FloatArray
    """The contention model's slowdown, fitted without the target's fold."""
    measured: FloatArray
    """The measured slowdown."""
    folds: IntArray
    """Fold that held the target out."""
    groups: IntArray
    """The target's co-located group (:attr:`PairRows.groups`)."""
    gpus: NDArray[np.str_]
    """The target's GPU."""
    strengths: FloatArray
    """The target's measured strength (:attr:`PairRows.strengths`), which sets its bin."""

    def subset(self, mask: BoolArray) -> OutOfFold:
        """The targets of ``mask``."""
        return OutOfFold(*(v[mask] for v in astuple(self)))

    def units(self) -> list[tuple[BoolArray, BoolArray]]:
        """Per fold: its targets, and the targets sharing no group with them."""
        tests = [self.folds == k for k in np.unique(self.folds).tolist()]
        return [(t, ~np.isin(self.groups, self.groups[t])) for t in tests]


def kind_shrinks(kind: str, oof: OutOfFold, prefix: str = "") -> dict[tuple[str, str], Shrink]:
    """Steps 2-3 of the module docstring on ``oof`` (keys ``(kind, prefix + region)``): each
    target is binned by its measured strength (:attr:`OutOfFold.strengths`)."""
    bins = strength_bins(oof.strengths)
    judge = partial(_judge, oof.raw, oof.measured, bins)
    regions = _regions(oof.raw, oof.measured, bins)
    labels = [STRENGTH_LABELS[b] for b in strength_bins(oof.raw).tolist()]
    scopes = np.array([label if label in regions else POOLED_REGION for label in labels])
    levels = choose_levels(oof.units(), bins, scopes, judge)
    return {
        (kind, prefix + key): region.shrink(levels.get(key, COVERAGE))
        for key, region in regions.items()
    }


def _gpu_shrinks(kind: str, oof: OutOfFold) -> dict[tuple[str, str], Shrink]:
    """Each GPU's own shrinks, where several GPUs' targets were fitted together (a Mondrian
    split: one GPU's pairs must not set another's weights and intervals)."""
    gpus = np.unique(oof.gpus).tolist()
    out: dict[tuple[str, str], Shrink] = {}
    for gpu in gpus if len(gpus) > 1 else []:
        mine = oof.subset(oof.gpus == gpu)
        if len(mine.measured) >= MIN_REGION:
            out.update(kind_shrinks(kind, mine, gpu + GPU_SEPARATOR))
    return out


def _held_out(rows: PairRows, test: NDArray[np.bool_], prior: float) -> FloatArray:
    fitted, scales = fit_level2(rows.take(np.flatnonzero(~test)), prior)
    return predict_rows(fitted, scales, rows.take(np.flatnonzero(test)))


def _out_of_fold(rows: PairRows, tests: list[BoolArray], prior: float) -> OutOfFold:
    raw, measured, folds, groups, gpus, strengths = [], [], [], [], [], []
    every_gpu = np.array(rows.gpus, dtype=np.str_)
    for k, test in enumerate(tests):
        if test.any() and not test.all():
            raw.append(_held_out(rows, test, prior))
            measured.append(rows.slowdowns[test])
            folds.append(np.full(int(test.sum()), k))
            groups.append(rows.groups[test])
            gpus.append(every_gpu[test])
            strengths.append(rows.strengths[test])
    if not raw:
        none = np.zeros(0, np.int_)
        return OutOfFold(np.zeros(0), np.zeros(0), none, none, np.zeros(0, np.str_), np.zeros(0))
    parts = (raw, measured, folds, groups, gpus, strengths)
    return OutOfFold(*(np.concatenate(v) for v in parts))


def _random_folds(rows: PairRows, seed: int) -> list[NDArray[np.bool_]]:
    groups = np.unique(rows.groups)
    order = np.random.default_rng(seed).permutation(len(groups))
    fold_of = dict(
        zip(groups[order].tolist(), (np.arange(len(groups)) % FOLDS).tolist(), strict=True)
    )
    assigned = np.array([fold_of[g] for g in rows.groups.tolist()], dtype=np.int_)
    return [assigned == k for k in range(FOLDS)]


def _model_folds(rows: PairRows) -> list[NDArray[np.bool_]]:
    models = sorted(set().union(*rows.models)) if len(rows) else []
    return [np.array([m in ms for ms in rows.models], dtype=bool) for m in models]


def fit_guard(rows: PairRows, prior: float, seed: int = 0) -> Guard:
    """Weights and intervals per (kind, region) from out-of-fold predictions on ``rows``."""
    shrinks: dict[tuple[str, str], Shrink] = {}
    folds = {"measured-pair": _random_folds(rows, seed), "new-pair": _model_folds(rows)}
    for kind in PAIR_KINDS:
        oof = _out_of_fold(rows, folds[kind], prior)
        if len(oof.measured):
            shrinks.update(kind_shrinks(kind, oof))
            shrinks.update(_gpu_shrinks(kind, oof))
    return Guard(shrinks)
