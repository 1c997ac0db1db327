"""Baselines the predictor is compared against on held-out data.

Level 1, ``gbm``: a learned model, scikit-learn's histogram gradient boosting
per (GPU, DNN model) on (log batch, log share) -> log latency, with monotone
constraints (non-decreasing in batch, non-increasing in share) so that it
plays by the same rules as the formula.

Level 2, ``no-interference``: co-located latency = latency alone.

Level 2, ``igniter-linear``: the form of iGniter's interference model (Xu et
al., "iGniter", IEEE TPDS 2022): the slowdown grows linearly with the
co-runners' total L2 cache utilisation, ``1 + alpha_m * sum_j l2_j``, one
coefficient ``alpha_m`` per target model (a pooled one for models not seen
in training), fitted by least squares on the same training pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from arkgpu.model.arrays import FloatArray
from arkgpu.traces.profiles import SoloRecord

GBM_ITERATIONS = 200
"""Boosting rounds; enough for ~150 points per model, small enough for seconds-long evals."""
GBM_THREADS = 1
"""OpenMP threads for boosting. One: on small data, more threads than free cores make
scikit-learn's OpenMP loops spin-wait (24 s instead of 0.7 s on a loaded 2-core VM)."""


def _x(batch: FloatArray, share: FloatArray) -> FloatArray:
    return np.column_stack([np.log(batch), np.log(share)])


class GbmLevel1:
    """Monotone gradient boosting per (GPU, DNN model), the learned level-1 baseline."""

    def __init__(self, train: Sequence[SoloRecord], seed: int = 0) -> None:
        groups: dict[tuple[str, str], list[SoloRecord]] = defaultdict(list)
        for record in train:
            groups[(record.gpu, record.model)].append(record)
        self.models: dict[tuple[str, str], HistGradientBoostingRegressor] = {}
        for key, records in groups.items():
            batch = np.array([r.batch for r in records], dtype=np.float64)
            share = np.array([r.share for r in records], dtype=np.float64)
            model = HistGradientBoostingRegressor(
                max_iter=GBM_ITERATIONS,
                learning_rate=0.1,
                min_samples_leaf=2,
                monotonic_cst=[1, -1],
                random_state=seed,
            )
            with threadpool_limits(GBM_THREADS):
                model.fit(_x(batch, share), np.log([r.latency_ms for r in records]))
            self.models[key] = model

    def predict(self, records: Sequence[SoloRecord]) -> FloatArray:
        """Latency in ms for each record's (GPU, model, batch, share); NaN if never trained on."""
        out = np.empty(len(records))
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, r in enumerate(records):
            groups[(r.gpu, r.model)].append(i)
        for key, rows in groups.items():
            if key not in self.models:
                out[rows] = np.nan
                continue
            batch = np.array([records[i].batch for i in rows], dtype=np.float64)
            share = np.array([records[i].share for i in rows], dtype=np.float64)
            with threadpool_limits(GBM_THREADS):
                out[rows] = np.exp(self.models[key].predict(_x(batch, share)))
        return out


def fit_igniter_linear(
    models: Sequence[str], l2_sums: FloatArray, slowdowns: FloatArray
) -> dict[str, float]:
    """alpha per target model (and ``"*"`` pooled) of ``slowdown = 1 + alpha * sum_j l2_j``."""
    names = np.asarray(models)

    def alpha(mask: NDArray[np.bool_]) -> float:
        x, y = l2_sums[mask], slowdowns[mask] - 1.0
        denominator = float(np.dot(x, x))
        return float(np.dot(x, y)) / denominator if denominator > 0 else 0.0

    fitted = {"*": alpha(np.ones(len(names), dtype=bool)) if len(names) else 0.0}
    for model in sorted(set(models)):
        fitted[model] = alpha(names == model)
    return fitted


def share_scaling(train: Sequence[SoloRecord], records: Sequence[SoloRecord]) -> FloatArray:
    """Spec-ratio baseline: the same batch's latency at the nearest measured share,
    scaled by the ratio of shares (work spread over proportionally more SMs).

    NaN where training has no point of the same (GPU, model, batch).
    """
    known: dict[tuple[str, str, int], list[SoloRecord]] = defaultdict(list)
    for record in train:
        known[(record.gpu, record.model, record.batch)].append(record)
    out = np.full(len(records), np.nan)
    for i, r in enumerate(records):
        candidates = known.get((r.gpu, r.model, r.batch))
        if candidates:
            near = min(candidates, key=lambda c: abs(np.log(c.share / r.share)))
            out[i] = near.latency_ms * near.share / r.share
    return out
