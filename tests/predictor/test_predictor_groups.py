"""Level 2 on groups of co-located workloads: pairs and ParvaGPU's MPS process groups."""

from __future__ import annotations

import pytest

from arkgpu.predictor import Predictor, Workload
from arkgpu.predictor.breakdown import MIN_BIN_TARGETS, strength_label, strength_labels
from arkgpu.predictor.evaluating import evaluate
from arkgpu.predictor.groups import as_groups, group_targets
from arkgpu.predictor.interference import Usage, overcommit
from arkgpu.traces.profiles import (
    MpsRecord,
    default_profile_dir,
    load_mps_profiles,
    load_solo_profiles,
)


def test_an_mps_group_is_one_target_with_its_copies_as_corunners() -> None:
    """Four identical processes: one target at share 1 with three identical co-runners."""
    group = as_groups([MpsRecord("A100-80GB", "resnet50", 8, 4, 20.0, 400.0)])[0]
    (target,) = group_targets([group])
    assert target.target == Workload("resnet50", 8, 1.0)
    assert target.corunners == (Workload("resnet50", 8, 1.0),) * 3
    assert target.latency_ms == 20.0


def test_overcommit_is_zero_until_the_sms_asked_for_exceed_the_gpu() -> None:
    """Shares that fit the GPU never overcommit; past it, the excess times the target's duty."""
    half = Usage(share=0.5, activity=0.4, occupancy=0.5, duty=0.8)
    assert overcommit(half, [half]) == 0.0
    full = Usage(share=1.0, activity=0.8, occupancy=1.0, duty=0.8)
    assert overcommit(full, [full, full]) == pytest.approx(0.8 * 2.0)


@pytest.fixture(scope="module")
def parvagpu() -> tuple[list, list]:  # type: ignore[type-arg]
    directory = default_profile_dir()
    solo = [r for r in load_solo_profiles(directory) if r.gpu == "A100-80GB"]
    return solo, load_mps_profiles(directory)


def test_mps_groups_teach_level2_the_stronger_interference(
    parvagpu: tuple[list, list],  # type: ignore[type-arg]
) -> None:
    """Fitted on the A100's MPS groups, level 2 predicts 5 copies of vgg19 at batch 64
    far slower than alone, close to the measurement; without them it cannot."""
    solo, mps = parvagpu
    row = next(r for r in mps if (r.model, r.batch, r.processes) == ("vgg19", 64, 5))
    copies = [Workload("vgg19", 64, 1.0)] * 4
    with_groups = Predictor.fit(solo, mps).colocated_latency_ms(copies[0], copies, "A100-80GB")
    without = Predictor.fit(solo).colocated_latency_ms(copies[0], copies, "A100-80GB")
    assert abs(with_groups / row.latency_ms - 1) < 0.15
    assert without < 0.6 * row.latency_ms


def test_eval_breaks_level2_down_by_strength_and_corunners(
    parvagpu: tuple[list, list],  # type: ignore[type-arg]
) -> None:
    """Leave-one-model-out on the A100: every held-out group is scored once, the bins add up
    to the total, the strong bins are filled, and level 2 beats no-interference in each."""
    solo, mps = parvagpu
    result = evaluate(solo, mps, "leave-one-model-out").to_dict()
    breakdown = result["level2_breakdown"]
    assert isinstance(breakdown, dict)
    ours = breakdown["strength"]["arkgpu contention"]
    assert sum(b["count"] for b in ours.values()) == result["level2"]["count"] == len(mps)  # type: ignore[index]
    assert set(ours) <= set(strength_labels())
    assert ours[strength_label(3.0)]["count"] >= 30
    plain = breakdown["strength"]["no-interference"]
    for label in (strength_label(1.7), strength_label(3.0)):
        assert ours[label]["mape_pct"] < plain[label]["mape_pct"] / 3
    counts = breakdown["corunners"]["arkgpu contention"]
    assert set(counts) == {"1 co-runner", "2 co-runners", "3 co-runners", "4 co-runners"}


@pytest.mark.parametrize("split", ["leave-one-batch-out", "leave-one-model-out"])
def test_level2_keeps_every_bin_near_the_per_bin_target_on_the_mps_groups(
    parvagpu: tuple[list, list],  # type: ignore[type-arg]
    split: str,
) -> None:
    """Issue 27's level-2 target on ParvaGPU's groups: at most 8% MAPE in every strength
    bin of at least 30 held-out targets, the weak bin (< 1.10: small batches whose latency
    barely grows with the batch) included. Measured 7.98% in the weak bin (docs/BENCHMARKS.md);
    the bound leaves half a point for other builds of the numerical libraries, and still
    fails the model before the batch-elasticity activity (10.02%)."""
    solo, mps = parvagpu
    result = evaluate(solo, mps, split).to_dict()
    ours = result["level2_breakdown"]["strength"]["arkgpu contention"]  # type: ignore[index]
    counted = {label: b for label, b in ours.items() if b["count"] >= MIN_BIN_TARGETS}
    assert strength_label(1.0) in counted
    for label, summary in counted.items():
        assert summary["mape_pct"] <= 8.5, (label, summary)


def test_level2_is_not_scored_when_no_group_is_left_to_learn_from(
    parvagpu: tuple[list, list],  # type: ignore[type-arg]
) -> None:
    """Leave-one-share-out on the A100: every MPS group runs at share 1, so the fold that
    holds share 1 out trains on no group; level 2 is not scored (it could only repeat
    no-interference), level 1 still is."""
    solo, mps = parvagpu
    result = evaluate(solo, mps, "leave-one-share-out")
    assert result.level2.count == 0
    assert result.level2.mape_pct is None
    assert result.level1.count == len(solo)
