"""The level-1 LC check keeps more headroom where the predictor is unsure (issue 27)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from arkgpu.colocation.sizing import BiasedPredictor, LcDemand, ShareSizer
from arkgpu.placement.lc_placing import (
    GpuSnapshot,
    be_verdicts,
    doubt_factor,
    lc_verdicts,
    peak_shares,
)
from arkgpu.predictor import Predictor, Workload


@dataclass(frozen=True)
class Demand:
    """An LC service by model only."""

    model: str


@dataclass
class PlainSizer:
    """Share = 0.1 x slowdown at batch 4; no ``doubt`` (as any sizer written before it)."""

    def plan(self, demand: Demand, slowdown: float = 1.0) -> tuple[float, int] | None:
        return 0.1 * slowdown, 4

    def slowdown(self, target: Workload, corunners: Sequence[Workload]) -> float:
        return 1.0 + 0.1 * len(corunners)


@dataclass
class ToySizer(PlainSizer):
    """The same sizer, unsure about model "unsure"."""

    def doubt(self, target: Workload) -> float:
        return 1.5 if target.model == "unsure" else 1.0


def test_an_unsure_prediction_gets_more_headroom() -> None:
    """The same demand, once sure and once unsure, next to the same LC service: the unsure
    one is planned 1.5x slower, so it gets a larger share; the sure one's share is what a
    sizer without doubt gives."""
    gpu = GpuSnapshot(0, 10_000, (Demand("sure"),))
    sure = lc_verdicts(Demand("sure"), 100, [gpu], ToySizer())[0]
    unsure = lc_verdicts(Demand("unsure"), 100, [gpu], ToySizer())[0]
    plain = lc_verdicts(Demand("unsure"), 100, [gpu], PlainSizer())[0]
    assert sure.fits
    assert unsure.fits
    assert unsure.share_bp == round(1.5 * sure.share_bp)
    assert plain.share_bp == sure.share_bp
    assert unsure.score < sure.score


def test_be_check_and_sure_plans_are_unchanged() -> None:
    """Pods without LC attributes (BE jobs) see the same spare share whatever the doubt,
    and without ``doubt=True`` the shares are those of a sizer without doubt."""
    gpu = GpuSnapshot(0, 10_000, (Demand("unsure"), Demand("sure")), be_jobs=1)
    assert be_verdicts(100, [gpu], ToySizer()) == be_verdicts(100, [gpu], PlainSizer())
    lcs = (Demand("unsure"), Demand("sure"))
    assert peak_shares(lcs, ToySizer()) == peak_shares(lcs, PlainSizer())
    assert peak_shares(lcs, ToySizer(), doubt=True) != peak_shares(lcs, ToySizer())
    assert doubt_factor(PlainSizer(), Workload("unsure", 1, 0.5)) == 1.0


def test_share_sizer_doubts_only_unsure_predictions(fitted: Predictor) -> None:
    """The project's sizer over the fitted predictor: 1 inside the measured ranges, the
    interval's upper end beyond them, 1 for a predictor that cannot say (a wrapper)."""
    sizer = ShareSizer(fitted, "V100")
    assert sizer.doubt(Workload("resnet50", 8, 0.5)) == 1.0
    beyond = sizer.doubt(Workload("resnet50", 8, 0.05))
    upper = fitted.confidence("resnet50", 8, 0.05, "V100").upper_ratio
    assert beyond == upper > 1.05
    assert ShareSizer(BiasedPredictor(fitted, 1.0), "V100").doubt(Workload("vgg16", 8, 0.5)) == 1.0


def test_lc_check_with_the_fitted_predictor_widens_unsure_services(fitted: Predictor) -> None:
    """On the V100, vgg16 (profiled on the A100 only) is a cross-GPU guess: the check gives
    it more share than a sizer that cannot doubt. resnet50 at a share inside iGniter's
    measured ones is confident: the same verdict either way."""
    demand = LcDemand("vgg16", target_ms=60.0, rate_rps=100.0)
    gpu = GpuSnapshot[LcDemand](0, 10_000)
    unsure = lc_verdicts(demand, 100, [gpu], ShareSizer(fitted, "V100"))[0]
    plain = lc_verdicts(demand, 100, [gpu], ShareSizer(BiasedPredictor(fitted, 1.0), "V100"))[0]
    assert unsure.fits
    assert plain.fits
    assert unsure.share_bp > plain.share_bp
    sure = LcDemand("resnet50", target_ms=60.0, rate_rps=300.0)
    with_doubt = lc_verdicts(sure, 100, [gpu], ShareSizer(fitted, "V100"))[0]
    without = lc_verdicts(sure, 100, [gpu], ShareSizer(BiasedPredictor(fitted, 1.0), "V100"))[0]
    assert with_doubt == without
    assert with_doubt.share_bp >= 1000  # inside iGniter's measured shares (0.1-1)
