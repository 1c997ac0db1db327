"""Online calibration: the correction converges, stays bounded, decays, and the
control loop gives a service measured slower than predicted more share."""

from __future__ import annotations

import math
import random

import pytest

from arkgpu.colocation.calibration import CalibrationConfig, Calibrator, Evidence, model_factors
from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.observations import BeObservation, GpuObservations, LcObservation
from arkgpu.colocation.sizing import CorrectedPredictor, LcDemand, ShareSizer
from arkgpu.predictor import Workload
from colocation.colocation_helpers import FakePredictor


def _learn(calibrator: Calibrator, ratio: float, seconds: int, noise: float = 0.0) -> None:
    rng = random.Random(7)
    for _ in range(seconds):
        measured = 10.0 * ratio * (1.0 + noise * rng.gauss(0.0, 1.0))
        calibrator.update([Evidence("a", measured, 10.0, batches=20)], ["a"], 1.0)


@pytest.mark.parametrize("truth", [0.85, 1.3, 1.6, 2.5])
def test_the_correction_converges_to_the_measured_ratio(truth: float) -> None:
    """A steady measured/predicted ratio is reached within 2% after eight half-lives,
    with 3% noise on every period's measurement."""
    calibrator = Calibrator(CalibrationConfig(response_s=5.0))
    _learn(calibrator, truth, 40, noise=0.03)
    assert calibrator.factor("a") == pytest.approx(truth, rel=0.02)


def test_the_correction_moves_at_the_configured_speed() -> None:
    """After one response half-life the log-correction is half-way to the evidence."""
    calibrator = Calibrator(CalibrationConfig(response_s=5.0))
    _learn(calibrator, 2.0, 5)
    assert math.log(calibrator.factor("a")) == pytest.approx(0.5 * math.log(2.0), rel=1e-9)


def test_the_correction_stays_within_its_bounds() -> None:
    """Evidence far outside [min_factor, max_factor] ends at the bound, never beyond."""
    config = CalibrationConfig(min_factor=0.8, max_factor=3.0)
    high, low = Calibrator(config), Calibrator(config)
    seen = []
    for _ in range(100):
        _learn(high, 50.0, 1)
        _learn(low, 0.01, 1)
        seen.append((high.factor("a"), low.factor("a")))
    assert all(lo >= 0.8 - 1e-12 and hi <= 3.0 + 1e-12 for hi, lo in seen)
    assert high.factor("a") == pytest.approx(3.0, rel=1e-4)
    assert low.factor("a") == pytest.approx(0.8, rel=1e-4)
    high.restore({"a": 40.0})
    assert high.factor("a") == pytest.approx(3.0)


def test_without_evidence_the_correction_decays_towards_one() -> None:
    """No evidence for one decay half-life halves log c; a period with too few batches is
    no evidence."""
    calibrator = Calibrator(CalibrationConfig(decay_half_life_s=60.0, min_batches=3))
    calibrator.restore({"a": 2.0})
    for _ in range(60):
        calibrator.update([Evidence("a", 100.0, 10.0, batches=2)], ["a"], 1.0)
    assert calibrator.factor("a") == pytest.approx(math.sqrt(2.0), rel=1e-9)
    for _ in range(6000):
        calibrator.update([], ["a"], 1.0)
    assert calibrator.factors() == {}


def test_a_service_that_left_is_forgotten_and_unusable_evidence_ignored() -> None:
    """A service no longer listed loses its correction; NaN or zero times teach nothing."""
    calibrator = Calibrator()
    calibrator.restore({"a": 1.5, "b": 1.5})
    calibrator.update([Evidence("a", math.nan, 10.0, 9), Evidence("a", 10.0, 0.0, 9)], ["a"], 1e-9)
    assert set(calibrator.logs) == {"a"}
    assert calibrator.factors() == {"a": 1.5}


def test_the_factors_applied_are_rounded_and_per_model_the_largest() -> None:
    """Applied factors sit on the resolution grid; placement takes each model's largest."""
    calibrator = Calibrator(CalibrationConfig(resolution=0.01))
    calibrator.restore({"a": 1.2345, "b": 1.0001, "c": 1.5})
    assert calibrator.factors() == {"a": 1.23, "c": 1.5}
    models = {"a": "resnet50", "c": "resnet50", "b": "vgg19"}
    assert model_factors({"a": 1.23, "c": 1.5, "b": 1.0}, models) == {
        "resnet50": 1.5,
        "vgg19": 1.0,
    }
    corrected = CorrectedPredictor(FakePredictor(), (("resnet50", 1.5),))
    target = Workload("resnet50", 4, 0.5)
    assert corrected.latency_ms("resnet50", 4, 0.5) == pytest.approx(1.5 * 9.0)
    assert corrected.latency_ms("vgg19", 4, 0.5) == pytest.approx(9.0)
    assert corrected.colocated_latency_ms(target, [target]) == pytest.approx(1.5 * 9.0 * 1.1)


def _observations(exec_ms: float, period: int) -> GpuObservations:
    demand = LcDemand("resnet50", 50.0, 100.0, 8, 2.0)
    lc = LcObservation("a", demand, 30.0, 0, None, exec_ms, 2, 50)  # p99 0.6 of target
    return GpuObservations(0, (lc,), (BeObservation("t", "vgg19", 32),), 1.0 + 0 * period)


def _run(config: ControlConfig, slower: float, ticks: int = 30) -> tuple[int, NodeController]:
    """``ticks`` periods of a service whose batches take ``slower`` x the prediction."""
    controller = NodeController(ShareSizer(FakePredictor()), config)
    decision = controller.tick(_observations(math.nan, 0))
    for period in range(1, ticks):
        unit = controller.units[0]
        predicted = unit.predicted_ms(_observations(1.0, period).lcs[0], _observations(1, 0).bes)
        decision = controller.tick(_observations(slower * predicted, period))
    entry = decision.entry("a")
    assert entry is not None
    return entry.share_bp, controller


def test_the_controller_gives_more_share_to_a_service_slower_than_predicted() -> None:
    """Batches 1.5x slower than predicted: with calibration the service's share grows
    (its correction near 1.5); without, the share stays where the predictor puts it; a
    service as fast as predicted keeps that share with calibration on."""
    on = ControlConfig(calibration=CalibrationConfig())
    plain, _ = _run(ControlConfig(), 1.5)
    calibrated, controller = _run(on, 1.5)
    exact, exact_controller = _run(on, 1.0)
    assert controller.corrections()["a"] == pytest.approx(1.5, rel=0.05)
    assert calibrated > plain * 1.2
    assert exact == plain
    assert exact_controller.corrections()["a"] == pytest.approx(1.0)


def test_calibration_off_is_the_default_and_decides_as_before() -> None:
    """ControlConfig() has no calibration; corrections stay empty whatever is measured."""
    assert ControlConfig().calibration is None
    share, controller = _run(ControlConfig(), 3.0)
    assert controller.corrections() == {}
    assert share == _run(ControlConfig(), 1.0)[0]
