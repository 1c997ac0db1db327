"""Level 2 guarded: never worse than no interference per bin, and intervals (issue 35)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np
import pytest

from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.placement.lc_placing import GpuSnapshot, lc_verdicts
from arkgpu.predictor import Predictor, Workload
from arkgpu.predictor.breakdown import MIN_BIN_TARGETS, strength_label
from arkgpu.predictor.calibrating import (
    COVERAGE,
    LEVELS,
    MIN_UNITS,
    BoolArray,
    choose_level,
    choose_levels,
    interval_ends,
    misses_allowed,
    strength_bins,
)
from arkgpu.predictor.evaluating import GUARDED, evaluate
from arkgpu.predictor.groups import as_groups, group_targets
from arkgpu.predictor.guarding import Guard, OutOfFold, Shrink, choose_weight, kind_shrinks
from arkgpu.predictor.pair_rows import build_rows, measured_alone, solo_key
from arkgpu.traces.profiles import (
    MpsRecord,
    PairRecord,
    SoloRecord,
    default_profile_dir,
    load_mps_profiles,
    load_pair_profiles,
    load_solo_profiles,
)

SETS = ("V100", "A100-80GB")
"""The shipped profile sets with co-located measurements: iGniter's pairs, ParvaGPU's groups."""


RANDOM_REPEATS = 10
"""Random splits pooled (seeds 0-9, as docs/BENCHMARKS.md): one split's bin of ~120
held-out targets moves by +-4 points from seed to seed."""


@cache
def _report(gpu: str, split: str) -> dict[str, Any]:
    """Held-out report on one set (``gpu``), or on both fitted together (``both``); the
    random split pooled over :data:`RANDOM_REPEATS` seeds."""
    directory = default_profile_dir()
    gpus = SETS if gpu == "both" else (gpu,)
    solo = [r for r in load_solo_profiles(directory) if r.gpu in gpus]
    groups: list[PairRecord | MpsRecord] = [
        *load_pair_profiles(directory),
        *load_mps_profiles(directory),
    ]
    repeats = RANDOM_REPEATS if split == "random" else 1
    chosen = [g for g in groups if g.gpu in gpus]
    return evaluate(solo, chosen, split, repeats=repeats).to_dict()


def _counted(report: dict[str, Any], name: str) -> dict[str, Any]:
    bins = report["level2_breakdown"]["strength"][name]
    return {label: b for label, b in bins.items() if b["count"] >= MIN_BIN_TARGETS}


@pytest.mark.parametrize("gpu", [*SETS, "both"])
@pytest.mark.parametrize("split", ["random", "leave-one-model-out"])
def test_guarded_level2_is_never_worse_than_no_interference_in_any_bin(
    gpu: str, split: str
) -> None:
    """Issue 35 on every shipped set and both together: in each strength bin of at least 30
    held-out targets the guarded level 2 is at most 1 point above assuming no interference,
    and its overall MAPE is at most 8% (measured 2.14-4.60%, the random split pooled over
    10 seeds; every bin at least 0.6 point below no interference, docs/BENCHMARKS.md; the
    bounds are the issue's own, away from the measured values, so other numerical builds
    pass)."""
    report = _report(gpu, split)
    plain = report["level2_breakdown"]["strength"]["no-interference"]
    for label, ours in _counted(report, GUARDED).items():
        assert ours["mape_pct"] <= plain[label]["mape_pct"] + 1.0, (label, ours)
    assert 0 < report["level2"]["mape_pct"] <= 8.0


@pytest.mark.parametrize("gpu", [*SETS, "both"])
@pytest.mark.parametrize("split", ["random", "leave-one-model-out"])
def test_level2_intervals_cover_held_out_targets_per_bin(gpu: str, split: str) -> None:
    """Issue 35: the 90% intervals hold 85-95% of the held-out targets in each bin of at
    least 30, leave-one-model-out (measured 88.79-94.46%) and the random split pooled over
    seeds 0-9 (measured 85.04-94.35%; the lowest, both sets' >= 2.00 bin, is 199 of 234
    targets: one target fewer inside fails). One random split's bin of ~120 targets held
    86.4-95.1% over seeds 0-4 (docs/studies/predictor.md), hence the pooling. A zero-width
    or unguarded interval holds far fewer, an unbounded one all."""
    report = _report(gpu, split)
    coverage = report["level2_coverage"]["strength"]
    counted = [b for b in coverage.values() if b["count"] >= MIN_BIN_TARGETS]
    assert counted
    for b in counted:
        assert 0.85 <= b["coverage"] <= 0.95, b
    kind = "new-pair" if split == "leave-one-model-out" else "measured-pair"
    assert set(report["level2_coverage"]["kind"]) == {kind}
    assert 0.85 <= report["level2_coverage"]["kind"][kind]["coverage"] <= 0.95


def _clustered(
    units: int, offset: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Log errors of ``units`` models, 60 targets each: noise plus a per-model offset
    (evenly spread over +-``offset``)."""
    shifts = np.linspace(-offset, offset, units)
    logs = np.concatenate([rng.normal(s, 0.03, 60) for s in shifts])
    folds = np.repeat(np.arange(units), 60)
    return logs, folds


def _level(logs: np.ndarray, folds: np.ndarray) -> float:
    bins = np.zeros(len(logs), dtype=np.int_)

    def calibrate(train: BoolArray) -> Callable[[float, BoolArray], BoolArray]:
        def inside(level: float, test: BoolArray) -> BoolArray:
            low, high = interval_ends(logs[train], bins[train], level)
            return (logs[test] >= low) & (logs[test] <= high)

        return inside

    units = [(folds == k, folds != k) for k in np.unique(folds)]
    return choose_level(units, bins, calibrate)


def test_choose_level_widens_where_errors_cluster_by_model() -> None:
    """Errors that share an offset per model: ends holding 90% of the other models' targets
    hold fewer of a held-out model's, so a higher level is chosen; errors without the offset
    keep a level at or near 90% (never below it); with fewer than MIN_UNITS units the level
    is the nominal one."""
    rng = np.random.default_rng(3)
    assert _level(*_clustered(10, 0.1, rng)) >= 0.93  # 0.93-0.97 over noise seeds 0-7
    assert _level(*_clustered(10, 0.0, rng)) <= COVERAGE + 0.02
    assert _level(*_clustered(MIN_UNITS - 1, 0.1, rng)) == COVERAGE
    assert min(LEVELS) == COVERAGE < max(LEVELS)


def test_choose_levels_raises_only_the_scope_whose_errors_cluster() -> None:
    """Two regions calibrated together: the one whose errors share a per-model offset gets a
    higher level than the one without (a level per region, not one per kind)."""
    rng = np.random.default_rng(5)
    clustered, folds = _clustered(10, 0.1, rng)
    plain, _ = _clustered(10, 0.0, rng)
    logs = np.concatenate([clustered, plain])
    units_of = np.concatenate([folds, folds])
    scopes = np.repeat(np.array(["a", "b"]), len(clustered))
    bins = np.zeros(len(logs), dtype=np.int_)

    def calibrate(train: BoolArray) -> Callable[[float, BoolArray], BoolArray]:
        def inside(level: float, test: BoolArray) -> BoolArray:
            found = {
                k: interval_ends(logs[train & (scopes == k)], bins[train & (scopes == k)], level)
                for k in ("a", "b")
            }
            low = np.array([found[k][0] for k in scopes[test]])
            high = np.array([found[k][1] for k in scopes[test]])
            return (logs[test] >= low) & (logs[test] <= high)

        return inside

    units = [(units_of == k, units_of != k) for k in range(10)]
    levels = choose_levels(units, bins, scopes, calibrate)
    assert levels["a"] >= 0.93
    assert levels["b"] <= COVERAGE + 0.02


def test_a_gpu_keeps_its_own_shrink_and_falls_back_to_the_pooled_one() -> None:
    """Mondrian by GPU: a GPU's own region first, then its own pooled, then every GPU's."""
    own, own_pooled = Shrink(0.5, -0.1, 0.1, 40), Shrink(1.0, -0.2, 0.2, 80)
    shared, shared_pooled = Shrink(1.0, -0.3, 0.3, 90), Shrink(1.0, -0.4, 0.4, 200)
    guard = Guard(
        {
            ("new-pair", "V100|<1.10"): own,
            ("new-pair", "V100|*"): own_pooled,
            ("new-pair", "<1.10"): shared,
            ("new-pair", "*"): shared_pooled,
        }
    )
    assert guard.find("new-pair", 1.05, "V100") is own
    assert guard.find("new-pair", 1.3, "V100") is own_pooled
    assert guard.find("new-pair", 1.05, "A100-80GB") is shared
    assert guard.find("new-pair", 1.05) is shared
    assert guard.find("new-pair", 1.3, "A100-80GB") is shared_pooled
    assert guard.find("measured-pair", 1.3, "A100-80GB") is shared_pooled
    assert guard.slowdown("new-pair", 1.08, "V100") == pytest.approx(1.04)


def test_out_of_fold_units_leave_out_every_target_of_a_shared_group() -> None:
    """A held-out model's unit is calibrated without any target of its groups (their other
    targets were held out in the co-runner's fold): as for a model never measured."""
    folds, groups = np.array([0, 0, 1, 1]), np.array([7, 8, 7, 9])
    oof = OutOfFold(np.ones(4), np.ones(4), folds, groups, np.array(["V100"] * 4), np.ones(4))
    (test0, train0), (_, train1) = oof.units()
    assert test0.tolist() == [True, True, False, False]
    assert train0.tolist() == [False, False, False, True]
    assert train1.tolist() == [False, True, False, False]


def test_choose_weight_keeps_a_good_model_and_drops_a_biased_one() -> None:
    """Out-of-fold slowdowns that match the measurement keep weight 1; a model that predicts
    1.3 where the measured slowdown is 1.0 is shrunk to no interference (weight 0)."""
    measured = np.linspace(1.0, 1.6, 60)
    assert choose_weight(measured.copy(), measured) == 1.0
    assert choose_weight(np.full(60, 1.3), np.ones(60)) == 0.0


def test_interval_ends_hold_ninety_percent_of_every_crowded_bin() -> None:
    """Mild targets miss below, contended ones above (as out of fold on iGniter): a plain
    5th-95th percentile interval holds 90% overall but only ~80% of the contended bin; the
    bin-conditional ends hold at least the split-conformal share of each bin and overall."""
    rng = np.random.default_rng(1)
    mild = np.concatenate([rng.normal(-0.02, 0.03, 600), rng.uniform(-0.25, -0.1, 60)])
    contended = np.concatenate([rng.normal(0.0, 0.02, 200), rng.uniform(0.1, 0.3, 40)])
    logs = np.concatenate([mild, contended])
    measured = np.concatenate([np.full(len(mild), 1.02), np.full(len(contended), 1.3)])
    plain_low, plain_high = np.percentile(logs, [5, 95])
    top = logs[len(mild) :]
    assert np.mean((top >= plain_low) & (top <= plain_high)) < 0.88
    low, high = interval_ends(logs, strength_bins(measured))
    assert low <= 0 <= high
    for part in (mild, contended, logs):
        assert np.sum((part < low) | (part > high)) <= misses_allowed(len(part))
    assert misses_allowed(100) == 9
    assert misses_allowed(9) == 0


def _scrambled(solo: list[SoloRecord], pairs: list[PairRecord]) -> list[PairRecord]:
    """iGniter's pairs with latencies that the features cannot explain: 85% barely slowed
    (< 1.1), 15% at random slowed 1.6-2.4x, whatever their models, batches and shares."""
    alone = Predictor.fit(solo)
    rng = np.random.default_rng(0)
    out = []
    for p in pairs:
        slow = rng.uniform(1.6, 2.4, 2) if rng.random() < 0.15 else 1 + abs(rng.normal(0, 0.03, 2))
        a = alone.latency_ms(p.model_a, p.batch_a, p.share_a, p.gpu) * slow[0]
        b = alone.latency_ms(p.model_b, p.batch_b, p.share_b, p.gpu) * slow[1]
        out.append(replace(p, latency_a_ms=a, latency_b_ms=b))
    return out


def test_guard_falls_back_to_no_interference_where_features_do_not_tell() -> None:
    """A set as a user might import, where mild and contended pairs look alike: the contention
    model predicts a slowdown for the mild pairs, over 5 points worse than no interference
    there (issue 35's failure); the guarded model is within 1 point of it in every bin."""
    directory = default_profile_dir()
    solo = [r for r in load_solo_profiles(directory) if r.gpu == "V100"]
    pairs = _scrambled(solo, load_pair_profiles(directory))
    report: dict[str, Any] = evaluate(solo, pairs, "random").to_dict()
    plain = report["level2_breakdown"]["strength"]["no-interference"]
    mild = strength_label(1.0)
    assert _counted(report, "arkgpu contention")[mild]["mape_pct"] > plain[mild]["mape_pct"] + 5
    for label, ours in _counted(report, GUARDED).items():
        assert ours["mape_pct"] <= plain[label]["mape_pct"] + 1.0, (label, ours)


def test_a_pair_never_measured_together_is_planned_with_headroom(fitted: Predictor) -> None:
    """iGniter never measured alexnet next to alexnet: the LC check plans it at the upper end
    of level 2's interval (a larger share, still placed); resnet50 next to vgg19 was
    measured and keeps the level-1 doubt (1 inside the measured ranges)."""
    sizer = ShareSizer(fitted, "V100")
    measured = sizer.pair_doubt(Workload("resnet50", 8, 0.5), [Workload("vgg19", 8, 0.5)])
    assert measured == sizer.doubt(Workload("resnet50", 8, 0.5)) == 1.0
    target, other = Workload("alexnet", 8, 0.5), [Workload("alexnet", 8, 0.5)]
    answer = fitted.pair_confidence(target, other, "V100")
    assert not answer.confident
    assert answer.low_ms < answer.latency_ms < answer.high_ms
    assert sizer.pair_doubt(target, other) == answer.upper_ratio > 1.0
    demand = LcDemand("alexnet", target_ms=20.0, rate_rps=1000.0)
    gpu = GpuSnapshot(0, 10_000, (demand,))
    verdict = lc_verdicts(demand, 100, [gpu], sizer)[0]
    blind = lc_verdicts(demand, 100, [gpu], _NoPairDoubt(fitted, "V100"))[0]
    assert verdict.fits
    assert blind.fits
    assert verdict.share_bp > blind.share_bp


class _NoPairDoubt(ShareSizer):
    """The same sizer without level 2's interval (as before issue 35)."""

    def pair_doubt(self, target: Workload, corunners: object) -> float:
        return self.doubt(target)


def test_rows_carry_the_measured_strength_of_each_target() -> None:
    """A target's strength bin is its co-located latency over its *measured* latency alone
    (as issue 35's bins and ``predictor eval``), not over level 1's: on iGniter's pairs the
    two put some targets in different bins. Without measured solo latencies the strength
    is the slowdown over level 1."""
    directory = default_profile_dir()
    solo = [r for r in load_solo_profiles(directory) if r.gpu == "V100"]
    groups = as_groups(load_pair_profiles(directory))
    alone = measured_alone(solo)
    rows = build_rows(Predictor.fit(solo), groups, alone)
    targets = group_targets(groups)
    expected = [t.latency_ms / alone[solo_key(t.gpu, t.target)] for t in targets]
    assert rows.strengths == pytest.approx(expected)
    moved = strength_bins(rows.strengths) != strength_bins(rows.slowdowns)
    assert 0 < moved.sum() < len(rows)
    plain = build_rows(Predictor.fit(solo), groups)
    assert plain.strengths.tolist() == plain.slowdowns.tolist()


def test_interval_ends_hold_every_bin_of_measured_strength() -> None:
    """Targets whose slowdowns over level 1 all fall in one bin, but whose measured strength
    splits them in two: 10 of 300 mild ones miss below, 30 of 100 contended ones above. The
    ends hold the split-conformal share of each strength bin (binned by the slowdowns, one
    bin of 400 may leave 39 out: 30 of the contended ones)."""
    rng = np.random.default_rng(2)
    mild = np.concatenate([rng.uniform(-0.02, 0.02, 290), rng.uniform(-0.08, -0.05, 10)])
    contended = np.concatenate([rng.uniform(-0.02, 0.02, 70), rng.uniform(0.05, 0.08, 30)])
    logs = np.concatenate([mild, contended])
    strengths = np.repeat([1.02, 1.2], [300, 100])
    count = len(logs)
    units = np.arange(count) % 3
    oof = OutOfFold(
        np.ones(count), np.exp(logs), units, np.arange(count), np.full(count, "V100"), strengths
    )
    shrink = kind_shrinks("new-pair", oof)[("new-pair", strength_label(1.0))]
    scores = np.log(oof.measured)  # as the guard computes them (bit for bit)
    inside = (scores >= shrink.low) & (scores <= shrink.high)
    assert np.sum(~inside[:300]) <= misses_allowed(300)
    assert np.sum(~inside[300:]) <= misses_allowed(100)
