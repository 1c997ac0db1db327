"""Fitting the predictor's parts from canonical profile records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.predictor.interference import (
    Interference,
    Usage,
    features,
    fit_interference,
)
from arkgpu.predictor.utilisation import FALLBACK, MIN_POINTS, UtilCurve, fit_util
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import PairRecord, SoloRecord

Key = tuple[str, str]
POOLED = "*"
"""Model name under which a GPU's pooled utilisation fit is kept."""


def _by_key(solo: Sequence[SoloRecord]) -> dict[Key, list[SoloRecord]]:
    groups: dict[Key, list[SoloRecord]] = defaultdict(list)
    for record in solo:
        groups[(record.gpu, record.model)].append(record)
    return groups


def _arrays(records: Sequence[SoloRecord]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    batch = np.array([r.batch for r in records], dtype=np.float64)
    share = np.array([r.share for r in records], dtype=np.float64)
    latency = np.array([r.latency_ms for r in records], dtype=np.float64)
    return batch, share, latency


def fit_curves(solo: Sequence[SoloRecord]) -> dict[Key, SoloCurve]:
    """One level-1 curve per (GPU, DNN model) present in ``solo``."""
    if not solo:
        raise ValueError("no solo profile records to fit")
    return {key: fit_curve(*_arrays(records)) for key, records in sorted(_by_key(solo).items())}


def _util_fit(records: Sequence[SoloRecord], pick: str) -> UtilCurve | None:
    points = [r for r in records if getattr(r, pick) is not None]
    if len(points) < MIN_POINTS:
        return None
    batch, share, _ = _arrays(points)
    return fit_util(batch, share, np.array([getattr(r, pick) for r in points]))


def fit_utils(solo: Sequence[SoloRecord]) -> dict[tuple[str, str, str], UtilCurve]:
    """L2 and DRAM utilisation curves keyed (GPU, model, "l2"|"dram").

    Each GPU also gets a pooled fit under model ``"*"`` (all its models' points)
    when it has any measurements, else :data:`FALLBACK`.
    """
    utils: dict[tuple[str, str, str], UtilCurve] = {}
    by_gpu: dict[str, list[SoloRecord]] = defaultdict(list)
    for (gpu, model), records in _by_key(solo).items():
        by_gpu[gpu].extend(records)
        for pick, name in (("l2_util_pct", "l2"), ("dram_util_pct", "dram")):
            curve = _util_fit(records, pick)
            if curve is not None:
                utils[(gpu, model, name)] = curve
    for gpu, records in by_gpu.items():
        for pick, name in (("l2_util_pct", "l2"), ("dram_util_pct", "dram")):
            utils[(gpu, POOLED, name)] = _util_fit(records, pick) or FALLBACK
    return utils


class Level1(Protocol):
    """What fitting level 2 needs from a predictor fitted at level 1."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = ...) -> float: ...

    def usage(self, workload: Workload, gpu: str) -> Usage: ...


def pair_rows(
    base: Level1, pairs: Sequence[PairRecord]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Feature rows, measured slowdowns and GPU names: two targets per pair (a with b, b with a)."""
    rows, slowdowns, gpus = [], [], []
    for pair in pairs:
        a = Workload(pair.model_a, pair.batch_a, pair.share_a)
        b = Workload(pair.model_b, pair.batch_b, pair.share_b)
        usage_a, usage_b = base.usage(a, pair.gpu), base.usage(b, pair.gpu)
        for target, ut, uo, measured in (
            (a, usage_a, usage_b, pair.latency_a_ms),
            (b, usage_b, usage_a, pair.latency_b_ms),
        ):
            alone = base.latency_ms(target.model, target.batch, target.share, pair.gpu)
            rows.append(features(ut, uo))
            slowdowns.append(measured / alone)
            gpus.append(pair.gpu)
    return np.array(rows), np.array(slowdowns), gpus


def fit_pairs(base: Level1, pairs: Sequence[PairRecord]) -> dict[str, Interference]:
    """Level-2 coefficients per GPU with pairs, plus a pooled fit under ``"*"``."""
    if not pairs:
        return {POOLED: Interference.none()}
    rows, slowdowns, gpus = pair_rows(base, pairs)
    names = np.array(gpus)
    fitted = {POOLED: fit_interference(rows, slowdowns)}
    for gpu in sorted(set(gpus)):
        mask = names == gpu
        fitted[gpu] = fit_interference(rows[mask], slowdowns[mask])
    return fitted
