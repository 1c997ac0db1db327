"""Calibration in the co-location simulator: the truth's interference scale, the oracle,
and the arkgpu mode learning a correction from its measured batches."""

from __future__ import annotations

import pytest

from arkgpu.colocation.deciding import GpuDecision
from arkgpu.colocation.observations import GpuObservations
from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.predictor import Workload
from arkgpu.sim.colocation.calibration_study import ScaledInterference, summarise
from arkgpu.sim.colocation.modes import ModeOptions
from arkgpu.sim.colocation.modes.arkgpu import ArkGpuMode
from arkgpu.sim.colocation.running import default_truth
from arkgpu.sim.colocation.simulating import CoLocationSim, RunOptions
from arkgpu.sim.colocation.truth import GroundTruth
from colocation.colocation_helpers import FakePredictor, be, lc, tiny


def test_the_interference_scale_multiplies_the_co_located_latency() -> None:
    """k times the measured slowdown with a whole co-runner executing, in proportion to a
    partial one, and nothing alone."""
    plain, scaled = default_truth(), default_truth()
    scaled.interference_scale = 1.6
    one = [("vgg19", 32, 1.0)]
    half = [("vgg19", 32, 0.5)]
    base = plain.slowdown("resnet50", 8, 0.5, one)
    assert base > 1.0
    assert scaled.slowdown("resnet50", 8, 0.5, one) == pytest.approx(1.6 * base)
    partial = plain.slowdown("resnet50", 8, 0.5, half)
    assert scaled.slowdown("resnet50", 8, 0.5, half) == pytest.approx(1.3 * partial)
    assert scaled.slowdown("resnet50", 8, 0.5, []) == 1.0


def test_the_oracle_knows_the_scaled_interference() -> None:
    """Level 2 times k with co-runners; level 1 and a lone target as fitted."""
    fake = FakePredictor()
    oracle = ScaledInterference(fake, 1.3)
    me, other = Workload("resnet50", 4, 0.5), Workload("vgg19", 32, 0.5)
    assert oracle.latency_ms("resnet50", 4, 0.5) == fake.latency_ms("resnet50", 4, 0.5)
    assert oracle.colocated_latency_ms(me, [other]) == pytest.approx(
        1.3 * fake.colocated_latency_ms(me, [other])
    )
    assert oracle.colocated_latency_ms(me, []) == fake.colocated_latency_ms(me, [])


def _run(truth: GroundTruth, sizer: ShareSizer, calibrate: bool) -> tuple[CoLocationSim, float]:
    scenario = tiny(lc("a", rps=300.0) + be("t"), gpus=1, duration_s=60.0)
    options = RunOptions(modes=ModeOptions(calibrate=calibrate), record_series=False)
    sim = CoLocationSim(scenario, mode="arkgpu", seed=2, truth=truth, sizer=sizer, options=options)
    shares: list[float] = []
    mode = sim.mode
    assert isinstance(mode, ArkGpuMode)
    tick = mode.controller.tick

    def record(observations: GpuObservations) -> GpuDecision:
        decision = tick(observations)
        entry = decision.entry("a")
        if entry is not None and sim.env.now > 30.0:
            shares.append(entry.share_bp)
        return decision

    mode.controller.tick = record  # type: ignore[method-assign]
    sim.run()
    return sim, sum(shares) / len(shares)


def test_the_arkgpu_mode_learns_stronger_interference_and_sizes_for_it(sizer: ShareSizer) -> None:
    """Truth 1.6x the profiled interference: the service beside a BE job learns a
    correction well above 1 from its measured batches, and its base share (the boost
    aside) is larger than without calibration."""
    truth = default_truth()
    truth.interference_scale = 1.6
    calibrated, with_share = _run(truth, sizer, True)
    plain, without_share = _run(truth, sizer, False)
    assert isinstance(calibrated.mode, ArkGpuMode)
    assert isinstance(plain.mode, ArkGpuMode)
    learnt = calibrated.mode.controller.corrections()["a"]
    assert 1.25 < learnt < 2.5
    assert plain.mode.controller.corrections() == {}
    base_with = with_share - 10_000 * calibrated.mode.controller.units[0].boosts["a"]
    base_without = without_share - 10_000 * plain.mode.controller.units[0].boosts["a"]
    assert base_with > base_without


def test_the_study_summary_compares_with_the_oracle() -> None:
    """Seed means per scale and variant, their ratio to the oracle's, the worst service."""
    rows = [
        {"variant": v, "scale": 1.3, "seed": s, "normalized_goodput": g,
         "be_throughput_norm": 1.0, "slo_attainment_min_pct": slo, "unplaced": []}
        for v, s, g, slo in (
            ("oracle", 1, 8.0, 99.5), ("oracle", 2, 6.0, 99.6),
            ("calibrated", 1, 7.0, 99.2), ("calibrated", 2, 7.0, 99.1),
            ("uncalibrated", 1, 7.5, 97.0), ("uncalibrated", 2, 7.5, 99.9),
        )
    ]  # fmt: skip
    out = {s["variant"]: s for s in summarise(rows)}
    assert out["oracle"]["vs_oracle"] == pytest.approx(1.0)
    assert out["calibrated"]["vs_oracle"] == pytest.approx(1.0)
    assert out["uncalibrated"]["vs_oracle"] == pytest.approx(7.5 / 7.0)
    assert out["calibrated"]["every_lc_99"]
    assert not out["uncalibrated"]["every_lc_99"]
    assert out["uncalibrated"]["slo_attainment_min_pct"] == 97.0


def test_level_one_sizes_with_the_corrections_learnt(truth: GroundTruth, sizer: ShareSizer) -> None:
    """Once a resnet50 service carries a correction, placement sizes resnet50 services
    with it (a larger share at the same peak); other models and no corrections: as fitted."""
    scenario = tiny(lc("a", rps=300.0) + lc("b", model="vgg19", target=40.0, rps=50.0), gpus=2)
    options = RunOptions(modes=ModeOptions(calibrate=True), record_series=False)
    sim = CoLocationSim(scenario, mode="arkgpu", seed=1, truth=truth, sizer=sizer, options=options)
    mode = sim.mode
    assert isinstance(mode, ArkGpuMode)
    sim._admit()
    assert mode._placing_sizer(sim.gpus) is sizer
    gpu = next(g.index for g in sim.gpus if any(x.name == "a" for x in g.lcs))
    mode.controller.seed_corrections(gpu, {"a": 1.5})
    placing = mode._placing_sizer(sim.gpus)
    demand = LcDemand("resnet50", 25.0, 300.0, 32, 2.0)
    other = LcDemand("vgg19", 40.0, 50.0, 32, 2.0)
    corrected, fitted = placing.required_share(demand), sizer.required_share(demand)
    assert corrected is not None
    assert fitted is not None
    assert corrected > fitted
    assert placing.required_share(other) == sizer.required_share(other)
    assert mode._placing_sizer(sim.gpus) is placing
