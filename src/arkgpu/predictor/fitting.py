"""Fitting the predictor's parts from canonical profile records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.confidence import Support
from arkgpu.predictor.curves import SoloCurve, fit_curve
from arkgpu.predictor.utilisation import MIN_POINTS, UtilCurve, fit_util
from arkgpu.traces.profiles import SoloRecord

Key = tuple[str, str]


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
