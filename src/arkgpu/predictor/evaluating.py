"""Held-out accuracy of the predictor and its baselines on measured profiles.

A split turns the records into folds (train and test records, for solo and
for pair profiles); every fold fits a fresh predictor on its training part
and predicts its test part; the absolute percentage errors of all folds are
pooled into MAPE and p90. A held-out solo record whose (GPU, model) has no
training record left (a model measured at one batch size, held out by
leave-one-batch-out) cannot be predicted at level 1 and is not scored; the
reported counts show how many were. Splits register by name with :func:`split`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from arkgpu.predictor.baselines import GbmLevel1, fit_igniter_linear, share_scaling
from arkgpu.predictor.config import PredictorConfig
from arkgpu.predictor.fitting import Target, pair_targets
from arkgpu.predictor.predicting import Predictor
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import PairRecord, SoloRecord

FloatArray = NDArray[np.float64]
TEST_FRACTION = 0.2
"""Share of records held out by the random split (the issue's 80/20)."""


@dataclass(frozen=True)
class Fold:
    """One train/test division of the solo and pair records."""

    solo_train: list[SoloRecord]
    solo_test: list[SoloRecord]
    pair_train: list[PairRecord]
    pair_test: list[PairRecord]
    scored: Callable[[Workload], bool] = lambda _: True
    """Which targets of the test pairs this fold scores (each target once over all folds)."""


SplitFunction = Callable[[Sequence[SoloRecord], Sequence[PairRecord], int], list[Fold]]
SPLITS: dict[str, SplitFunction] = {}


def split(name: str) -> Callable[[SplitFunction], SplitFunction]:
    """Register a split under ``name``; a duplicate name raises."""

    def register(function: SplitFunction) -> SplitFunction:
        if name in SPLITS:
            raise ValueError(f"split {name!r} registered twice")
        SPLITS[name] = function
        return function

    return register


T = TypeVar("T")


def _random_halves(items: Sequence[T], rng: np.random.Generator) -> tuple[list[T], list[T]]:
    order = rng.permutation(len(items))
    cut = round(len(items) * TEST_FRACTION)
    return [items[i] for i in order[cut:]], [items[i] for i in order[:cut]]


@split("random")
def random_split(solo: Sequence[SoloRecord], pairs: Sequence[PairRecord], seed: int) -> list[Fold]:
    """One fold: a random 20% of solo records and, independently, 20% of pairs held out."""
    rng = np.random.default_rng(seed)
    solo_train, solo_test = _random_halves(solo, rng)
    pair_train, pair_test = _random_halves(pairs, rng)
    return [Fold(solo_train, solo_test, pair_train, pair_test)]


def _matching(key: Callable[[Workload], object], value: object) -> Callable[[Workload], bool]:
    def matches(workload: Workload) -> bool:
        return key(workload) == value

    return matches


def _leave_one_out(
    solo: Sequence[SoloRecord],
    pairs: Sequence[PairRecord],
    solo_key: Callable[[SoloRecord], object],
    pair_keys: Callable[[PairRecord], tuple[object, object]],
    target_key: Callable[[Workload], object],
) -> list[Fold]:
    values = sorted({solo_key(r) for r in solo} | {k for p in pairs for k in pair_keys(p)}, key=str)
    folds = []
    for value in values:
        folds.append(
            Fold(
                [r for r in solo if solo_key(r) != value],
                [r for r in solo if solo_key(r) == value],
                [p for p in pairs if value not in pair_keys(p)],
                [p for p in pairs if value in pair_keys(p)],
                _matching(target_key, value),
            )
        )
    return folds


@split("leave-one-batch-out")
def leave_one_batch_out(
    solo: Sequence[SoloRecord], pairs: Sequence[PairRecord], seed: int
) -> list[Fold]:
    """One fold per batch size: every solo record and every pair with that batch held out;
    the fold scores the held-out pairs' targets of that batch (each target once)."""
    del seed
    return _leave_one_out(
        solo, pairs, lambda r: r.batch, lambda p: (p.batch_a, p.batch_b), lambda w: w.batch
    )


@split("leave-one-share-out")
def leave_one_share_out(
    solo: Sequence[SoloRecord], pairs: Sequence[PairRecord], seed: int
) -> list[Fold]:
    """One fold per share (a MIG size stands for a smaller GPU): predict an unseen size."""
    del seed
    return _leave_one_out(
        solo,
        pairs,
        lambda r: round(r.share, 4),
        lambda p: (round(p.share_a, 4), round(p.share_b, 4)),
        lambda w: round(w.share, 4),
    )


@split("leave-one-model-out")
def leave_one_model_out(
    solo: Sequence[SoloRecord], pairs: Sequence[PairRecord], seed: int
) -> list[Fold]:
    """One fold per DNN model: every pair involving it held out from level 2.

    Level 1 is fitted per model and cannot predict a model never profiled, so
    every solo record stays in training and level 1 reports no error here:
    a new model gets its solo profile, never its interference, measured.
    """
    del seed
    models = sorted({p.model_a for p in pairs} | {p.model_b for p in pairs})
    return [
        Fold(
            list(solo),
            [],
            [p for p in pairs if model not in (p.model_a, p.model_b)],
            [p for p in pairs if model in (p.model_a, p.model_b)],
            _matching(lambda w: w.model, model),
        )
        for model in models
    ]


@split("cross-gpu")
def cross_gpu(solo: Sequence[SoloRecord], pairs: Sequence[PairRecord], seed: int) -> list[Fold]:
    """One fold per GPU model: predict its models from their profiles on the other GPUs.

    The predictor then scales shares by the GPUs' speed ratio (config
    ``gpu_speed``). Only models profiled on another GPU are scored; level 2 is
    not scored (its pairs were measured on one GPU).
    """
    del seed, pairs
    folds = []
    for gpu in sorted({r.gpu for r in solo}):
        train = [r for r in solo if r.gpu != gpu]
        elsewhere = {r.model for r in train}
        test = [r for r in solo if r.gpu == gpu and r.model in elsewhere]
        if train and test:
            folds.append(Fold(train, test, [], []))
    return folds


@dataclass(frozen=True)
class ErrorSummary:
    """Absolute percentage errors of one predictor on one split, pooled over folds."""

    mape_pct: float | None
    """Mean absolute percentage error, % (None when nothing was held out)."""
    p90_ape_pct: float | None
    """90th percentile of the absolute percentage error, %."""
    count: int
    """Predictions scored."""

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready values."""
        return {"mape_pct": self.mape_pct, "p90_ape_pct": self.p90_ape_pct, "count": self.count}


def summarise(errors: Sequence[float]) -> ErrorSummary:
    """MAPE and p90 of absolute percentage errors (NaNs, unpredictable points, dropped)."""
    values = np.asarray(errors, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return ErrorSummary(None, None, 0)
    return ErrorSummary(float(values.mean()), float(np.percentile(values, 90)), int(values.size))


def ape(predicted: FloatArray, measured: FloatArray) -> FloatArray:
    """Absolute percentage errors, %."""
    result: FloatArray = np.abs(predicted / measured - 1.0) * 100.0
    return result


@dataclass
class Errors:
    """Absolute percentage errors collected over folds, by predictor name."""

    level1: list[float] = field(default_factory=list)
    level2: list[float] = field(default_factory=list)
    baselines1: dict[str, list[float]] = field(default_factory=dict)
    baselines2: dict[str, list[float]] = field(default_factory=dict)

    def add(self, table: dict[str, list[float]], name: str, values: FloatArray) -> None:
        table.setdefault(name, []).extend(values.tolist())


def _level1(fold: Fold, predictor: Predictor, errors: Errors, seed: int) -> None:
    if not fold.solo_test:
        return
    known = {model for _, model in predictor.curves}
    test = [r for r in fold.solo_test if r.model in known]
    if not test:
        return
    measured = np.array([r.latency_ms for r in test])
    ours = np.array([predictor.latency_ms(r.model, r.batch, r.share, r.gpu) for r in test])
    errors.level1.extend(ape(ours, measured).tolist())
    gbm = GbmLevel1(fold.solo_train, seed).predict(test)
    errors.add(errors.baselines1, "gbm", ape(gbm, measured))
    errors.add(
        errors.baselines1, "share-scaling", ape(share_scaling(fold.solo_train, test), measured)
    )


def _l2(predictor: Predictor, workload: Workload, gpu: str) -> float:
    l2 = predictor.usage(workload, gpu).l2
    return np.nan if l2 is None else l2


def _igniter_alphas(predictor: Predictor, train: list[Target]) -> dict[str, float]:
    l2 = np.array([_l2(predictor, t.corunner, t.gpu) for t in train])
    alone = np.array(
        [predictor.latency_ms(t.target.model, t.target.batch, t.target.share, t.gpu) for t in train]
    )
    slowdowns = np.array([t.latency_ms for t in train]) / alone
    keep = ~np.isnan(l2)
    models = [t.target.model for t, k in zip(train, keep, strict=True) if k]
    return fit_igniter_linear(models, l2[keep], slowdowns[keep])


def _level2(fold: Fold, predictor: Predictor, errors: Errors) -> None:
    test = [
        t
        for t in pair_targets(fold.pair_test)
        if fold.scored(t.target)
        and predictor.knows(t.target.model)
        and predictor.knows(t.corunner.model)
    ]
    if not test:
        return
    train = pair_targets(fold.pair_train)
    alphas = _igniter_alphas(
        predictor,
        [t for t in train if predictor.knows(t.target.model) and predictor.knows(t.corunner.model)],
    )
    actual = np.array([t.latency_ms for t in test])
    alone = np.array(
        [predictor.latency_ms(t.target.model, t.target.batch, t.target.share, t.gpu) for t in test]
    )
    ours = np.array([predictor.colocated_latency_ms(t.target, [t.corunner], t.gpu) for t in test])
    slope = np.array([alphas.get(t.target.model, alphas["*"]) for t in test])
    linear = alone * (1.0 + slope * np.array([_l2(predictor, t.corunner, t.gpu) for t in test]))
    errors.level2.extend(ape(ours, actual).tolist())
    errors.add(errors.baselines2, "no-interference", ape(alone, actual))
    errors.add(errors.baselines2, "igniter-linear", ape(linear, actual))


@dataclass(frozen=True)
class Evaluation:
    """Held-out errors of level 1, level 2 and the baselines on one split."""

    split: str
    seed: int
    folds: int
    level1: ErrorSummary
    level2: ErrorSummary
    baselines: dict[str, dict[str, ErrorSummary]]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready report: ``level1``, ``level2`` and ``baselines`` with MAPE and p90."""
        return {
            "split": self.split,
            "seed": self.seed,
            "folds": self.folds,
            "level1": self.level1.to_dict(),
            "level2": self.level2.to_dict(),
            "baselines": {
                level: {name: s.to_dict() for name, s in table.items()}
                for level, table in self.baselines.items()
            },
        }


def evaluate(
    solo: Sequence[SoloRecord],
    pairs: Sequence[PairRecord],
    split_name: str,
    *,
    seed: int = 0,
    config: PredictorConfig | None = None,
    on_fold: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Fit and score the predictor and its baselines on every fold of ``split_name``.

    ``on_fold(done, total)`` is called after each fold (progress display).
    """
    try:
        make_folds = SPLITS[split_name]
    except KeyError:
        raise ValueError(f"unknown split {split_name!r} (known: {', '.join(SPLITS)})") from None
    folds = make_folds(solo, pairs, seed)
    errors = Errors()
    for done, fold in enumerate(folds, start=1):
        predictor = Predictor.fit(fold.solo_train, fold.pair_train, config)
        _level1(fold, predictor, errors, seed)
        _level2(fold, predictor, errors)
        if on_fold is not None:
            on_fold(done, len(folds))
    baselines = {
        "level1": {k: summarise(v) for k, v in errors.baselines1.items()},
        "level2": {k: summarise(v) for k, v in errors.baselines2.items()},
    }
    return Evaluation(
        split_name, seed, len(folds), summarise(errors.level1), summarise(errors.level2), baselines
    )
