"""The predictor says how sure it is: kinds of query, intervals, calibration and coverage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arkgpu.predictor import Confidence, Predictor, Workload
from arkgpu.predictor.intervals import Residual, calibrate, held_out_residuals
from arkgpu.traces.profiles import default_profile_dir, load_solo_profiles


def test_inside_the_measured_ranges_is_confident(fitted: Predictor) -> None:
    """resnet50 on the V100 at a measured batch and share: confident, a narrow interval
    around the prediction, no reasons."""
    answer = fitted.confidence("resnet50", 8, 0.5, "V100")
    assert answer.confident
    assert answer.kind == "measured-range"
    assert answer.reasons == ()
    assert answer.low_ms < answer.latency_ms < answer.high_ms
    assert answer.latency_ms == fitted.latency_ms("resnet50", 8, 0.5, "V100")
    assert answer.upper_ratio < 1.15


@pytest.mark.parametrize(
    ("batch", "share", "named"),
    [(64, 0.5, "batch 64 outside the measured 1-32"), (8, 0.05, "share 0.05 outside")],
)
def test_beyond_measured_batches_or_shares_is_not_confident(
    fitted: Predictor, batch: int, share: float, named: str
) -> None:
    """A batch or share beyond what was measured is extrapolated, and the reason says which."""
    answer = fitted.confidence("resnet50", batch, share, "V100")
    assert not answer.confident
    assert answer.kind == "extrapolated"
    assert any(named in reason for reason in answer.reasons)
    inside = fitted.confidence("resnet50", 8, 0.5, "V100")
    assert answer.upper_ratio > inside.upper_ratio


def test_unseen_gpu_and_new_model_are_unsure_with_wider_intervals(fitted: Predictor) -> None:
    """A model never profiled on a GPU falls back on another GPU's curve (cross-gpu); a
    model known from one point borrows other models' curves (new-model); both are
    unsure, with intervals wider than an extrapolation's."""
    cross = fitted.confidence("vgg16", 8, 0.5, "V100")
    assert (cross.kind, cross.confident) == ("cross-gpu", False)
    assert "never profiled on V100" in cross.reasons[0]
    guess = fitted.with_model("newnet", 8, 0.5, 12.0, "V100")
    new = guess.confidence("newnet", 8, 0.5, "V100")
    assert (new.kind, new.confident) == ("new-model", False)
    assert new.latency_ms == pytest.approx(12.0, rel=0.05)
    extrapolated = fitted.confidence("resnet50", 64, 0.5, "V100")
    assert cross.upper_ratio > extrapolated.upper_ratio
    assert new.upper_ratio > extrapolated.upper_ratio


def test_both_levels_answer_with_one_confidence_type(fitted: Predictor) -> None:
    """Level 1 and level 2 answer with :class:`Confidence`; each is confident only for its
    level's confident kind, and only a level-1 answer carries reasons in its JSON."""
    alone = fitted.confidence("resnet50", 8, 0.5, "V100")
    target = Workload("resnet50", 8, 0.5)
    measured = fitted.pair_confidence(target, [Workload("vgg19", 8, 0.5)], "V100")
    alexnet = Workload("alexnet", 8, 0.5)
    unseen = fitted.pair_confidence(alexnet, [alexnet], "V100")
    assert all(isinstance(a, Confidence) for a in (alone, measured, unseen))
    kinds = [(a.kind, a.confident) for a in (alone, measured, unseen)]
    assert kinds == [("measured-range", True), ("measured-pair", True), ("new-pair", False)]
    level2 = ["latency_ms", "low_ms", "high_ms", "kind", "confident"]
    assert list(alone.to_dict()) == [*level2, "reasons"]
    assert list(measured.to_dict()) == list(unseen.to_dict()) == level2


def test_saved_predictor_keeps_support_and_intervals(fitted: Predictor, tmp_path: Path) -> None:
    """The ranges and intervals survive save and load."""
    path = tmp_path / "p.json"
    changed = fitted.with_intervals({"extrapolated": (-0.5, 0.7)})
    changed.save(path)
    loaded = Predictor.load(path)
    assert loaded.support == fitted.support
    assert loaded.intervals["extrapolated"] == (-0.5, 0.7)
    answer = loaded.confidence("resnet50", 64, 0.5, "V100")
    assert answer.high_ms == pytest.approx(answer.latency_ms * np.exp(0.7))


def test_calibration_takes_percentiles_and_checks_coverage_per_model() -> None:
    """Intervals are the 5th/95th percentiles per kind; coverage scores each model against
    an interval made without it, so a model unlike the others is not covered."""
    rng = np.random.default_rng(0)
    residuals = [
        Residual("extrapolated", f"m{i % 4}", float(v))
        for i, v in enumerate(rng.normal(0.0, 0.1, 400))
    ]
    residuals += [Residual("cross-gpu", "a", 0.5)] * 20 + [Residual("cross-gpu", "b", -0.5)] * 20
    result = calibrate(residuals, {"new-model": (-1.0, 1.0)})
    low, high = result.intervals["extrapolated"]
    assert low == pytest.approx(-0.164, abs=0.03)
    assert high == pytest.approx(0.164, abs=0.03)
    assert 0.8 < result.coverage["extrapolated"] < 0.97
    assert result.coverage["cross-gpu"] == 0.0
    assert result.intervals["new-model"] == (-1.0, 1.0)
    assert result.counts["measured-range"] == 0


def test_held_out_residuals_cover_every_kind_on_measured_profiles() -> None:
    """On three ParvaGPU A100 models plus one V100 model shared with the A100 set, the
    folds yield every kind, and the measured-range errors are the smallest."""
    solo = [
        r
        for r in load_solo_profiles(default_profile_dir())
        if r.model in {"resnet50", "vgg19", "mobilenetv2"}
        and (r.gpu == "A100-80GB" or r.batch <= 4)
    ]
    residuals = held_out_residuals(solo)
    kinds = {r.kind for r in residuals}
    assert kinds == {"measured-range", "extrapolated", "new-model", "cross-gpu"}

    def spread(kind: str) -> float:
        return float(np.median([abs(r.log_ratio) for r in residuals if r.kind == kind]))

    assert spread("measured-range") < spread("new-model")
    assert spread("measured-range") < spread("cross-gpu")
