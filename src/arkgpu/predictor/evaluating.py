"""Held-out accuracy of the predictor and its baselines on measured profiles.

A split turns the records into folds (train and test records, for solo and
for pair profiles); every fold fits a fresh predictor on its training part
and predicts its test part; the absolute percentage errors of all folds are
pooled into MAPE and p90. A held-out solo record whose (GPU, model) has no
training record left (a model measured at one batch size, held out by
leave-one-batch-out) cannot be predicted at level 1 and is not scored; the
reported counts show how many were. Likewise level 2 is not scored in a fold
whose training part holds no co-located measurement at all (leave-one-share-out
on ParvaGPU: every MPS group runs at share 1, so holding share 1 out holds out
every group): level 2 would only repeat the no-interference baseline there.
Splits live in :mod:`arkgpu.predictor.splitting`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import FloatArray
from arkgpu.predictor.anchoring import pick_anchor
from arkgpu.predictor.baselines import GbmLevel1, fit_igniter_linear, share_scaling
from arkgpu.predictor.breakdown import bin_errors, corunner_label, strength_label, strength_labels
from arkgpu.predictor.config import PredictorConfig
from arkgpu.predictor.covering import Coverage, coverage_tables
from arkgpu.predictor.groups import Group, Target, as_groups, group_targets
from arkgpu.predictor.onboarding import own_curve, pick_design
from arkgpu.predictor.predicting import Predictor
from arkgpu.predictor.splitting import NEW_MODEL_SPLIT, SEEDED_SPLITS, SPLITS, Fold
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import MpsRecord, PairRecord, SoloRecord


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


def summarise(errors: Sequence[float] | FloatArray) -> ErrorSummary:
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


GUARDED = "arkgpu guarded"
"""Name of the predictor's own level-2 answer in the breakdowns (the contention model
shrunk where cross-validation did not trust it, :mod:`arkgpu.predictor.guarding`)."""


@dataclass
class Errors:
    """Absolute percentage errors collected over folds, by predictor name."""

    level1: list[float] = field(default_factory=list)
    level2: list[float] = field(default_factory=list)
    baselines1: dict[str, list[float]] = field(default_factory=dict)
    baselines2: dict[str, list[float]] = field(default_factory=dict)
    strength: list[float] = field(default_factory=list)
    """Per level-2 error: measured co-located / solo latency (predicted solo where unmeasured)."""
    corunners: list[int] = field(default_factory=list)
    """Per level-2 error: number of co-runners."""
    inside: list[bool] = field(default_factory=list)
    """Per level-2 error: the measured latency lies in the predictor's 90% interval."""
    kinds: list[str] = field(default_factory=list)
    """Per level-2 error: the kind of query (:data:`arkgpu.predictor.confidence.PAIR_KINDS`)."""
    repeats: list[int] = field(default_factory=list)
    """Per level-2 error: which repeat of the split it came from (0 for one)."""

    def add(self, table: dict[str, list[float]], name: str, values: FloatArray) -> None:
        table.setdefault(name, []).extend(values.tolist())


def _new_model_level1(
    fold: Fold, predictor: Predictor, errors: Errors, points: tuple[int, int] | None
) -> None:
    """A model held out: predicted from one point borrowing the others' shape, or, with
    ``points`` (batches, shares), fitted on that many of its own points alone."""
    model = fold.new_model
    others = {key: c for key, c in predictor.curves.items() if key[1] != model}
    if model is None or not others:
        return
    without = Predictor(others, predictor.utils, predictor.interference, predictor.config)
    for gpu in sorted({r.gpu for r in fold.solo_train if r.model == model}):
        mine = [r for r in fold.solo_train if r.model == model and r.gpu == gpu]
        if points is None:
            _score_anchored(without, model, gpu, mine, errors)
        else:
            _score_own_points(mine, points, errors)


def _score_own_points(mine: list[SoloRecord], points: tuple[int, int], errors: Errors) -> None:
    profiled = pick_design(mine, *points)
    test = [r for r in mine if all(r is not p for p in profiled)]
    if test:
        ours = own_curve(profiled).latency_ms_many(*_batches_shares(test))
        errors.level1.extend(ape(ours, np.array([r.latency_ms for r in test])).tolist())


def _score_anchored(
    without: Predictor, model: str, gpu: str, mine: list[SoloRecord], errors: Errors
) -> None:
    anchor = pick_anchor(mine)
    test = [r for r in mine if r is not anchor]
    if not test:
        return
    guess = without.with_model(model, anchor.batch, anchor.share, anchor.latency_ms, gpu)
    measured = np.array([r.latency_ms for r in test])
    ours = guess.latency_ms_many(model, *_batches_shares(test), gpu)
    errors.level1.extend(ape(ours, measured).tolist())
    naive = [anchor.latency_ms * r.batch * anchor.share / (anchor.batch * r.share) for r in test]
    errors.add(errors.baselines1, "anchor-proportional", ape(np.array(naive), measured))


def _batches_shares(records: Sequence[SoloRecord]) -> tuple[FloatArray, FloatArray]:
    batch = np.array([r.batch for r in records], dtype=np.float64)
    return batch, np.array([r.share for r in records], dtype=np.float64)


def _level1(
    fold: Fold,
    predictor: Predictor,
    errors: Errors,
    seed: int,
    new_model_points: tuple[int, int] | None = None,
) -> None:
    if fold.new_model is not None:
        _new_model_level1(fold, predictor, errors, new_model_points)
        return
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


def _l2(predictor: Predictor, workloads: Sequence[Workload], gpu: str) -> float:
    """Summed L2 use of ``workloads`` (NaN if any was never measured)."""
    total = 0.0
    for workload in workloads:
        l2 = predictor.usage(workload, gpu).l2
        if l2 is None:
            return np.nan
        total += l2
    return total


def _alone(predictor: Predictor, targets: Sequence[Target]) -> FloatArray:
    queries = [(t.target, t.gpu) for t in targets]
    return np.array([predictor.latency_ms(w.model, w.batch, w.share, gpu) for w, gpu in queries])


def _igniter_alphas(predictor: Predictor, train: list[Target]) -> dict[str, float]:
    l2 = np.array([_l2(predictor, t.corunners, t.gpu) for t in train])
    slowdowns = np.array([t.latency_ms for t in train]) / _alone(predictor, train)
    keep = ~np.isnan(l2)
    models = [t.target.model for t, k in zip(train, keep, strict=True) if k]
    return fit_igniter_linear(models, l2[keep], slowdowns[keep])


def _predictable(predictor: Predictor, t: Target) -> bool:
    return all(predictor.knows(w.model) for w in (t.target, *t.corunners))


def _level2(
    fold: Fold,
    predictor: Predictor,
    errors: Errors,
    published: dict[str, float] | None,
    solo_latency: Callable[[Target], float | None],
) -> None:
    test = [
        t
        for t in group_targets(fold.pair_test)
        if fold.scored(t.target) and _predictable(predictor, t)
    ]
    train = [t for t in group_targets(fold.pair_train) if _predictable(predictor, t)]
    if not test or not train:
        return  # no co-located measurement left to learn from: nothing level 2 could show
    alphas = _igniter_alphas(predictor, train)
    actual = np.array([t.latency_ms for t in test])
    alone = _alone(predictor, test)
    sure = [predictor.pair_confidence(t.target, t.corunners, t.gpu) for t in test]
    ours = np.array([c.latency_ms for c in sure])
    raw = [predictor.contention_slowdown(t.target, t.corunners, t.gpu) for t in test]
    errors.inside += [c.low_ms <= m <= c.high_ms for c, m in zip(sure, actual, strict=True)]
    errors.kinds += [c.kind for c in sure]
    slope = np.array([alphas.get(t.target.model, alphas["*"]) for t in test])
    l2_sums = np.array([_l2(predictor, t.corunners, t.gpu) for t in test])
    errors.level2.extend(ape(ours, actual).tolist())
    errors.add(errors.baselines2, "arkgpu contention", ape(alone * np.array(raw), actual))
    errors.add(errors.baselines2, "no-interference", ape(alone, actual))
    errors.add(errors.baselines2, "igniter-linear", ape(alone * (1.0 + slope * l2_sums), actual))
    if published is not None:
        slopes = np.array([published.get(t.target.model, np.nan) for t in test])
        published_ms = alone * (1 + slopes * 100 * l2_sums)
        errors.add(errors.baselines2, "igniter-published", ape(published_ms, actual))
    for t, predicted_alone in zip(test, alone, strict=True):
        measured_alone = solo_latency(t)
        reference = predicted_alone if measured_alone is None else measured_alone
        errors.strength.append(t.latency_ms / reference)
        errors.corunners.append(len(t.corunners))


def solo_lookup(solo: Sequence[SoloRecord]) -> Callable[[Target], float | None]:
    """The measured latency alone of a target's (GPU, model, batch, share), if any."""
    known = {(r.gpu, r.model, r.batch, round(r.share, 4)): r.latency_ms for r in solo}

    def find(t: Target) -> float | None:
        return known.get((t.gpu, t.target.model, t.target.batch, round(t.target.share, 4)))

    return find


@dataclass(frozen=True)
class Evaluation:
    """Held-out errors of level 1, level 2 and the baselines on one split."""

    split: str
    seed: int
    folds: int
    level1: ErrorSummary
    level2: ErrorSummary
    baselines: dict[str, dict[str, ErrorSummary]]
    level2_breakdown: dict[str, dict[str, dict[str, ErrorSummary]]] = field(default_factory=dict)
    """``strength`` and ``corunners``: level-2 predictor name -> bin label -> summary."""
    level2_coverage: dict[str, dict[str, Coverage]] = field(default_factory=dict)
    """``strength`` and ``kind``: bin label -> share of held-out targets inside the
    predictor's 90% interval (pooled over repeats, with their lowest and highest)."""
    repeats: int = 1
    """Random splits pooled (seeds ``seed`` .. ``seed + repeats - 1``)."""
    new_model_points: tuple[int, int] | None = None
    """Leave-one-model-out: (batches, shares) of its own points a held-out model was
    fitted on (None: one point, the others' shape borrowed)."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready report: ``level1``, ``level2``, ``baselines`` and ``level2_breakdown``."""
        return {
            "split": self.split,
            "seed": self.seed,
            "repeats": self.repeats,
            "new_model_points": None
            if self.new_model_points is None
            else list(self.new_model_points),
            "folds": self.folds,
            "level1": self.level1.to_dict(),
            "level2": self.level2.to_dict(),
            "baselines": {
                level: {name: s.to_dict() for name, s in table.items()}
                for level, table in self.baselines.items()
            },
            "level2_breakdown": {
                by: {n: {b: s.to_dict() for b, s in bins.items()} for n, bins in table.items()}
                for by, table in self.level2_breakdown.items()
            },
            "level2_coverage": {
                by: {b: c.to_dict() for b, c in bins.items()}
                for by, bins in self.level2_coverage.items()
            },
        }


def _breakdown(errors: Errors) -> dict[str, dict[str, dict[str, ErrorSummary]]]:
    """Each level-2 predictor's errors by strength bin and by co-runner count."""
    named = {GUARDED: errors.level2, **errors.baselines2}
    order = {label: i for i, label in enumerate(strength_labels())}
    by_strength, by_count = {}, {}
    for name, values in named.items():
        bins = bin_errors(values, errors.strength, lambda r: strength_label(float(r)))  # type: ignore[arg-type]
        by_strength[name] = {k: summarise(bins[k]) for k in sorted(bins, key=order.__getitem__)}
        counts = bin_errors(values, errors.corunners, lambda n: corunner_label(int(n)))  # type: ignore[call-overload]
        by_count[name] = {k: summarise(counts[k]) for k in sorted(counts)}
    return {"strength": by_strength, "corunners": by_count}


def evaluate(
    solo: Sequence[SoloRecord],
    pairs: Sequence[PairRecord | MpsRecord | Group],
    split_name: str,
    *,
    seed: int = 0,
    repeats: int = 1,
    new_model_points: tuple[int, int] | None = None,
    config: PredictorConfig | None = None,
    on_fold: Callable[[int, int], None] | None = None,
    published_l2_slopes: dict[str, float] | None = None,
) -> Evaluation:
    """Fit and score the predictor and its baselines on every fold of ``split_name``.

    ``pairs`` may mix pair records, MPS group records and groups
    (:mod:`arkgpu.predictor.groups`). ``repeats`` > 1 (seeded splits only) pools
    the folds of seeds ``seed`` .. ``seed + repeats - 1`` (Monte Carlo
    cross-validation: every figure is over all their held-out records).
    ``new_model_points`` (batches, shares; leave-one-model-out only) fits each held-out
    model on that many of its own points instead (:mod:`arkgpu.predictor.onboarding`).
    ``on_fold(done, total)`` is called after each fold (progress display).
    ``published_l2_slopes`` (iGniter's k_l2 per model, from
    :func:`arkgpu.traces.profiles_importing.load_igniter_l2_slopes`) adds the
    ``igniter-published`` level-2 baseline: latency alone x (1 + k_l2 x
    co-runners' L2 %), iGniter's L2 term with its own coefficients (its
    idle-time and power/frequency terms are not modelled).
    """
    _check_points(split_name, new_model_points)
    folds = _repeated_folds(solo, as_groups(pairs), split_name, seed, repeats)
    errors = Errors()
    measured_alone = solo_lookup(solo)
    for done, (repeat, fold) in enumerate(folds, start=1):
        predictor = Predictor.fit(fold.solo_train, fold.pair_train, config)
        _level1(fold, predictor, errors, seed + repeat, new_model_points)
        _level2(fold, predictor, errors, published_l2_slopes, measured_alone)
        errors.repeats += [repeat] * (len(errors.inside) - len(errors.repeats))
        if on_fold is not None:
            on_fold(done, len(folds))
    baselines = {
        "level1": {k: summarise(v) for k, v in errors.baselines1.items()},
        "level2": {k: summarise(v) for k, v in errors.baselines2.items()},
    }
    coverage = coverage_tables(errors.inside, errors.strength, errors.kinds, errors.repeats)
    return Evaluation(
        split_name,
        seed,
        len(folds),
        summarise(errors.level1),
        summarise(errors.level2),
        baselines,
        _breakdown(errors),
        coverage,
        repeats,
        new_model_points,
    )


def _check_points(split_name: str, points: tuple[int, int] | None) -> None:
    if points is None:
        return
    if split_name != NEW_MODEL_SPLIT:
        raise ValueError(f"new-model points apply to leave-one-model-out, not {split_name!r}")
    if min(points) < 1 or points[0] * points[1] < 2:
        raise ValueError(f"new-model points {points}: at least 1 x 1 and 2 points in all")


def _repeated_folds(
    solo: Sequence[SoloRecord], groups: Sequence[Group], split_name: str, seed: int, repeats: int
) -> list[tuple[int, Fold]]:
    """Every fold of ``repeats`` runs of the split, each with its repeat's index."""
    try:
        make_folds = SPLITS[split_name]
    except KeyError:
        raise ValueError(f"unknown split {split_name!r} (known: {', '.join(SPLITS)})") from None
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    if repeats > 1 and split_name not in SEEDED_SPLITS:
        raise ValueError(
            f"split {split_name!r} holds out the same records whatever the seed: "
            f"only {', '.join(sorted(SEEDED_SPLITS))} can be repeated"
        )
    return [(r, f) for r in range(repeats) for f in make_folds(solo, groups, seed + r)]
