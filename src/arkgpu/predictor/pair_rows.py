"""Level 2's measured targets as feature rows, and level 2 fitted and predicted from rows.

Fitting level 2 needs, for every measured co-located target, the features of
both feature sets (:mod:`arkgpu.predictor.interference`) and the measured
slowdown over level 1's latency alone. They depend on level 1 only, so they
are computed once (:func:`build_rows`) and every level-2 fit (the predictor's
own, and the cross-validation refits of :mod:`arkgpu.predictor.guarding`) is
a least-squares fit on a subset of the rows (:func:`fit_level2`), predicted
back without level 1 (:func:`predict_rows`).

A target whose co-runners are several different models gets the per-combination
scale 1 in :func:`predict_rows` (the predictor itself scales each co-runner's
term; the shipped pairs and MPS groups have co-runners of one model only).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.groups import Group
from arkgpu.predictor.interference import (
    FEATURE_NAMES,
    Interference,
    fit_interference,
    group_features,
)
from arkgpu.predictor.level1 import Level1
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import SoloRecord

POOLED = "*"
"""GPU name under which the level-2 fit over every GPU's pairs is kept."""
Combo = tuple[str, str, str]
"""(GPU, target model, co-runner model)."""


@dataclass(frozen=True)
class PairRows:
    """One row per measured co-located target that level 1 can predict alone."""

    gpus: list[str]
    measured: NDArray[np.bool_]
    """Every workload of the target's group has measured L2/DRAM use (``memory`` features)."""
    memory: FloatArray
    """``memory`` features (zeros where not measured), one row per target."""
    activity: FloatArray
    """``activity`` features, one row per target."""
    slowdowns: FloatArray
    """Measured co-located latency over level 1's latency alone."""
    strengths: FloatArray
    """Measured co-located latency over the measured latency alone where the solo profiles
    hold the target's (GPU, model, batch, share), else :attr:`slowdowns`: the strength bin
    of issue 35's targets (:mod:`arkgpu.predictor.breakdown`)."""
    combos: list[Combo | None]
    """The (GPU, target, co-runner) models when every co-runner is one model, else None."""
    groups: NDArray[np.int_]
    """Index of the target's group (targets of one group are held out together)."""
    models: list[frozenset[str]]
    """DNN models of the target's group."""

    def __len__(self) -> int:
        return len(self.gpus)

    def take(self, index: NDArray[np.int_] | Sequence[int]) -> PairRows:
        """The rows at ``index``."""
        i = np.asarray(index, dtype=np.int_)
        return PairRows(
            [self.gpus[k] for k in i],
            self.measured[i],
            self.memory[i],
            self.activity[i],
            self.slowdowns[i],
            self.strengths[i],
            [self.combos[k] for k in i],
            self.groups[i],
            [self.models[k] for k in i],
        )

    def features(self, kind: str) -> FloatArray:
        """The feature matrix of ``kind`` (``memory`` or ``activity``)."""
        return self.memory if kind == "memory" else self.activity


SoloKey = tuple[str, str, int, float]
"""(GPU, model, batch, share rounded to 4 digits) of a measured latency alone."""


def solo_key(gpu: str, workload: Workload) -> SoloKey:
    """The key of ``workload`` alone on ``gpu`` in :func:`measured_alone`."""
    return (gpu, workload.model, workload.batch, round(workload.share, 4))


def measured_alone(solo: Iterable[SoloRecord]) -> dict[SoloKey, float]:
    """Measured latency alone per :func:`solo_key`."""
    return {solo_key(r.gpu, Workload(r.model, r.batch, r.share)): r.latency_ms for r in solo}


def build_rows(
    base: Level1, groups: Sequence[Group], alone_ms: Mapping[SoloKey, float] | None = None
) -> PairRows:
    """Rows of every measured target of ``groups`` whose models level 1 knows; ``alone_ms``
    (:func:`measured_alone`) gives the measured latencies alone of :attr:`PairRows.strengths`."""
    alone_ms = alone_ms or {}
    cols: dict[str, list[object]] = defaultdict(list)
    for index, group in enumerate(groups):
        for i, latency in enumerate(group.latencies_ms):
            others = group.members[:i] + group.members[i + 1 :]
            target = group.members[i]
            if latency is None or not all(base.knows(w.model) for w in group.members):
                continue
            ut, uo = base.usage(target, group.gpu), [base.usage(w, group.gpu) for w in others]
            measured = ut.measured and all(u.measured for u in uo)
            alone = base.latency_ms(target.model, target.batch, target.share, group.gpu)
            corunner_models = {w.model for w in others}
            single = len(corunner_models) == 1
            cols["gpus"].append(group.gpu)
            cols["measured"].append(measured)
            width = len(FEATURE_NAMES["memory"])
            mem = group_features("memory", ut, uo) if measured else np.zeros(width)
            cols["memory"].append(mem)
            cols["activity"].append(group_features("activity", ut, uo))
            cols["slowdowns"].append(latency / alone)
            cols["strengths"].append(latency / alone_ms.get(solo_key(group.gpu, target), alone))
            combo = (group.gpu, target.model, others[0].model) if single else None
            cols["combos"].append(combo)
            cols["groups"].append(index)
            cols["models"].append(group.models)
    return _rows(cols)


def _rows(cols: dict[str, list[object]]) -> PairRows:
    def matrix(kind: str) -> FloatArray:
        return np.array(cols[kind], dtype=np.float64).reshape(-1, len(FEATURE_NAMES[kind]))

    return PairRows(
        [str(g) for g in cols["gpus"]],
        np.array(cols["measured"], dtype=bool),
        matrix("memory"),
        matrix("activity"),
        np.array(cols["slowdowns"], dtype=np.float64),
        np.array(cols["strengths"], dtype=np.float64),
        cols["combos"],  # type: ignore[arg-type]
        np.array(cols["groups"], dtype=np.int_),
        cols["models"],  # type: ignore[arg-type]
    )


Fitted = dict[tuple[str, str], Interference]


def fit_thetas(rows: PairRows) -> Fitted:
    """Level-2 coefficients keyed (GPU or ``"*"`` for all pooled, feature set)."""
    fitted: Fitted = {}
    names = np.array(rows.gpus)
    for kind in FEATURE_NAMES:
        use = rows.measured if kind == "memory" else np.ones(len(rows), dtype=bool)
        x, y = rows.features(kind)[use], rows.slowdowns[use]
        fitted[(POOLED, kind)] = fit_interference(kind, x, y)
        for gpu in sorted(set(names[use])):
            mask = names[use] == gpu
            fitted[(gpu, kind)] = fit_interference(kind, x[mask], y[mask])
    return fitted


def _parts(fitted: Fitted, rows: PairRows) -> tuple[FloatArray, FloatArray]:
    """Per row: the per-co-runner extra slowdown (scale 1) and the group term's."""
    extra, crowding = np.zeros(len(rows)), np.zeros(len(rows))
    for i, gpu in enumerate(rows.gpus):
        kind = "memory" if rows.measured[i] else "activity"
        model = fitted.get((gpu, kind)) or fitted.get((POOLED, kind))
        if model is None:
            continue
        theta, row = np.asarray(model.theta), rows.features(kind)[i]
        extra[i] = float(theta[:-1] @ row[:-1])
        crowding[i] = float(theta[-1] * row[-1])
    return extra, crowding


def fit_scales(fitted: Fitted, rows: PairRows, prior: float) -> dict[Combo, float]:
    """Scale of the level-2 extra slowdown per (GPU, target model, co-runner model).

    For each combination with measured targets, least squares of the observed
    extra slowdown ``o`` on the predicted one ``e`` through the origin, shrunk
    towards 1 by ``prior`` targets' worth of evidence::

        scale = (sum e*o + prior * mean(e^2)) / (sum e^2 + prior * mean(e^2)), clipped at 0

    Combinations never measured keep scale 1 (the shared features alone). Only
    targets whose co-runners are all one model count, and the scale applies to
    the per-co-runner terms: the group term (overcommit) is left out of both.
    """
    extra, crowding = _parts(fitted, rows)
    sums: dict[Combo, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    observed = rows.slowdowns - 1.0 - crowding
    for i, combo in enumerate(rows.combos):
        if combo is not None:
            entry = sums[combo]
            entry[0] += extra[i] * observed[i]
            entry[1] += extra[i] * extra[i]
            entry[2] += 1.0
    scales = {}
    for key, (cross, square, count) in sums.items():
        if square > 0 and np.isfinite(prior):
            weight = prior * square / count
            scales[key] = max(0.0, (cross + weight) / (square + weight))
    return scales


def fit_level2(rows: PairRows, prior: float) -> tuple[Fitted, dict[Combo, float]]:
    """Coefficients and per-combination scales fitted on ``rows``."""
    fitted = fit_thetas(rows)
    return fitted, fit_scales(fitted, rows, prior)


def predict_rows(fitted: Fitted, scales: dict[Combo, float], rows: PairRows) -> FloatArray:
    """The contention model's slowdown of each row (as :meth:`Predictor.slowdown`)."""
    extra, crowding = _parts(fitted, rows)
    scale = np.array([1.0 if c is None else scales.get(c, 1.0) for c in rows.combos])
    result: FloatArray = 1.0 + crowding + scale * extra
    return result
