"""Fitting the predictor's parts from canonical profile records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.predictor.interference import (
    FEATURE_SETS,
    Interference,
    Usage,
    features,
    fit_interference,
)
from arkgpu.predictor.utilisation import MIN_POINTS, UtilCurve, fit_util
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import PairRecord, SoloRecord

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


@dataclass(frozen=True, slots=True)
class Target:
    """One measured co-located latency: a target workload with one co-runner."""

    gpu: str
    target: Workload
    corunner: Workload
    latency_ms: float
    """Measured latency of the target's batch."""


def pair_targets(pairs: Sequence[PairRecord]) -> list[Target]:
    """Two targets per pair: a with b, and b with a."""
    out = []
    for p in pairs:
        a = Workload(p.model_a, p.batch_a, p.share_a)
        b = Workload(p.model_b, p.batch_b, p.share_b)
        out += [Target(p.gpu, a, b, p.latency_a_ms), Target(p.gpu, b, a, p.latency_b_ms)]
    return out


def _rows(
    base: Level1, targets: Sequence[Target], kind: str
) -> tuple[FloatArray, FloatArray, list[str]]:
    rows, slowdowns, gpus = [], [], []
    for t in targets:
        if not (base.knows(t.target.model) and base.knows(t.corunner.model)):
            continue  # no solo profile: level 1 cannot say what the slowdown is relative to
        ut, uo = base.usage(t.target, t.gpu), base.usage(t.corunner, t.gpu)
        if kind == "memory" and not (ut.measured and uo.measured):
            continue
        alone = base.latency_ms(t.target.model, t.target.batch, t.target.share, t.gpu)
        rows.append(features(kind, ut, uo))
        slowdowns.append(t.latency_ms / alone)
        gpus.append(t.gpu)
    width = len(FEATURE_SETS[kind](Usage(1.0, 0.0), Usage(1.0, 0.0)))
    return np.array(rows).reshape(-1, width), np.array(slowdowns), gpus


def fit_pairs(base: Level1, pairs: Sequence[PairRecord]) -> dict[tuple[str, str], Interference]:
    """Level-2 coefficients keyed (GPU or ``"*"`` for all pairs pooled, feature set)."""
    targets = pair_targets(pairs)
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
    fitted: Level2, pairs: Sequence[PairRecord], prior: float
) -> dict[tuple[str, str, str], float]:
    """Scale of the level-2 extra slowdown per (GPU, target model, co-runner model).

    For each combination with measured pairs, least squares of the observed
    extra slowdown ``o`` on the predicted one ``e`` through the origin, shrunk
    towards 1 by ``prior`` targets' worth of evidence::

        scale = (sum e*o + prior * mean(e^2)) / (sum e^2 + prior * mean(e^2)), clipped at 0

    Combinations never measured keep scale 1 (the shared features alone).
    """
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for t in pair_targets(pairs):
        if not (fitted.knows(t.target.model) and fitted.knows(t.corunner.model)):
            continue
        alone = fitted.latency_ms(t.target.model, t.target.batch, t.target.share, t.gpu)
        predicted = fitted.slowdown(t.target, [t.corunner], t.gpu) - 1.0
        observed = t.latency_ms / alone - 1.0
        entry = sums[(t.gpu, t.target.model, t.corunner.model)]
        entry[0] += predicted * observed
        entry[1] += predicted * predicted
        entry[2] += 1.0
    scales = {}
    for key, (cross, square, count) in sums.items():
        if square > 0 and np.isfinite(prior):
            weight = prior * square / count
            scales[key] = max(0.0, (cross + weight) / (square + weight))
    return scales
