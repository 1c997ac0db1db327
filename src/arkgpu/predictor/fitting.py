"""Fitting the predictor's parts from canonical profile records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.confidence import Support
from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.predictor.groups import Group, Target, as_groups, group_targets
from arkgpu.predictor.interference import (
    FEATURE_NAMES,
    FEATURE_SETS,
    Interference,
    Usage,
    fit_interference,
    group_features,
)
from arkgpu.predictor.utilisation import MIN_POINTS, UtilCurve, fit_util
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import MpsRecord, PairRecord, SoloRecord

Key = tuple[str, str]
POOLED = "*"
"""GPU name under which the level-2 fit over every GPU's pairs is kept."""


def _by_key(solo: Sequence[SoloRecord]) -> dict[Key, list[SoloRecord]]:
    groups: dict[Key, list[SoloRecord]] = defaultdict(list)
    for record in solo:
        groups[(record.gpu, record.model)].append(record)
    return groups


def _arrays(records: Sequence[SoloRecord]) -> tuple[FloatArray, FloatArray, FloatArray]:
    batch = np.array([r.batch for r in records], dtype=np.float64)
    share = np.array([r.share for r in records], dtype=np.float64)
    latency = np.array([r.latency_ms for r in records], dtype=np.float64)
    return batch, share, latency


def fit_curves(solo: Sequence[SoloRecord]) -> dict[Key, SoloCurve]:
    """One level-1 curve per (GPU, DNN model) present in ``solo``."""
    if not solo:
        raise ValueError("no solo profile records to fit")
    return {key: fit_curve(*_arrays(records)) for key, records in sorted(_by_key(solo).items())}


def fit_support(solo: Sequence[SoloRecord]) -> dict[Key, Support]:
    """The batch and share ranges of each (GPU, DNN model) in ``solo``."""
    return {key: Support.of(records) for key, records in sorted(_by_key(solo).items())}


def fit_utils(solo: Sequence[SoloRecord]) -> dict[tuple[str, str, str], UtilCurve]:
    """L2 and DRAM utilisation curves keyed (GPU, model, "l2"|"dram"), where measured."""
    utils: dict[tuple[str, str, str], UtilCurve] = {}
    for (gpu, model), records in sorted(_by_key(solo).items()):
        for pick, name in (("l2_util_pct", "l2"), ("dram_util_pct", "dram")):
            points = [r for r in records if getattr(r, pick) is not None]
            if len(points) >= MIN_POINTS:
                batch, share, _ = _arrays(points)
                measured = np.array([getattr(r, pick) for r in points], dtype=np.float64)
                utils[(gpu, model, name)] = fit_util(batch, share, measured)
    return utils


class Level1(Protocol):
    """What fitting level 2 needs from a predictor fitted at level 1."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = ...) -> float: ...

    def usage(self, workload: Workload, gpu: str = ...) -> Usage: ...

    def knows(self, model: str) -> bool: ...


class Level2(Level1, Protocol):
    """A predictor fitted at both levels, whose per-combination scales are still all 1."""

    def slowdown(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = ...
    ) -> float: ...

    def crowding(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = ...
    ) -> float: ...


def _rows(
    base: Level1, targets: Sequence[Target], kind: str
) -> tuple[FloatArray, FloatArray, list[str]]:
    rows, slowdowns, gpus = [], [], []
    for t in targets:
        if not all(base.knows(w.model) for w in (t.target, *t.corunners)):
            continue  # no solo profile: level 1 cannot say what the slowdown is relative to
        ut = base.usage(t.target, t.gpu)
        others = [base.usage(w, t.gpu) for w in t.corunners]
        if kind == "memory" and not (ut.measured and all(u.measured for u in others)):
            continue
        alone = base.latency_ms(t.target.model, t.target.batch, t.target.share, t.gpu)
        rows.append(group_features(kind, ut, others))
        slowdowns.append(t.latency_ms / alone)
        gpus.append(t.gpu)
    width = len(FEATURE_NAMES[kind])
    return np.array(rows).reshape(-1, width), np.array(slowdowns), gpus


def fit_pairs(
    base: Level1, pairs: Sequence[PairRecord | MpsRecord | Group]
) -> dict[tuple[str, str], Interference]:
    """Level-2 coefficients keyed (GPU or ``"*"`` for all groups pooled, feature set)."""
    targets = group_targets(as_groups(pairs))
    fitted: dict[tuple[str, str], Interference] = {}
    for kind in FEATURE_SETS:
        rows, slowdowns, gpus = _rows(base, targets, kind)
        names = np.array(gpus)
        fitted[(POOLED, kind)] = fit_interference(kind, rows, slowdowns)
        for gpu in sorted(set(gpus)):
            mask = names == gpu
            fitted[(gpu, kind)] = fit_interference(kind, rows[mask], slowdowns[mask])
    return fitted


def fit_pair_scales(
    fitted: Level2, pairs: Sequence[PairRecord | MpsRecord | Group], prior: float
) -> dict[tuple[str, str, str], float]:
    """Scale of the level-2 extra slowdown per (GPU, target model, co-runner model).

    For each combination with measured pairs, least squares of the observed
    extra slowdown ``o`` on the predicted one ``e`` through the origin, shrunk
    towards 1 by ``prior`` targets' worth of evidence::

        scale = (sum e*o + prior * mean(e^2)) / (sum e^2 + prior * mean(e^2)), clipped at 0

    Combinations never measured keep scale 1 (the shared features alone). Only
    targets whose co-runners are all one model count, and the scale applies to
    the per-co-runner terms: the group term (overcommit) is left out of both.
    """
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for t in group_targets(as_groups(pairs)):
        corunner_models = {w.model for w in t.corunners}
        if len(corunner_models) != 1 or not fitted.knows(t.target.model):
            continue
        if not fitted.knows(t.corunners[0].model):
            continue
        alone = fitted.latency_ms(t.target.model, t.target.batch, t.target.share, t.gpu)
        crowding = fitted.crowding(t.target, t.corunners, t.gpu)
        predicted = fitted.slowdown(t.target, t.corunners, t.gpu) - 1.0 - crowding
        observed = t.latency_ms / alone - 1.0 - crowding
        entry = sums[(t.gpu, t.target.model, t.corunners[0].model)]
        entry[0] += predicted * observed
        entry[1] += predicted * predicted
        entry[2] += 1.0
    scales = {}
    for key, (cross, square, count) in sums.items():
        if square > 0 and np.isfinite(prior):
            weight = prior * square / count
            scales[key] = max(0.0, (cross + weight) / (square + weight))
    return scales
