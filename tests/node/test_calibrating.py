"""The runtime's online calibration: learnt from batch reports, logged, exported,
published in calibration.json, and picked up again by a restarted runtime."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arkgpu.client import LatencyReporter
from arkgpu.colocation.calibration import CALIBRATION_FILE, CalibrationConfig
from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.limiter.region import USAGE_FILE, Limits, create_region, read_limits
from arkgpu.node.bench import attach
from arkgpu.node.calibrating import read_published
from arkgpu.node.config import NodeConfig
from arkgpu.node.metrics import RuntimeCollector
from arkgpu.node.pods import PodSpec, write_pod
from arkgpu.node.runtime import NodeRuntime
from arkgpu.predictor import Predictor, Workload, default_predictor

LC = PodSpec("lc", "lc", 0, "resnet50", 1024, target_ms=100.0, peak_rps=40.0)
BE = PodSpec("be", "be", 0, "vgg16", 2048)


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    """The predictor fitted on the shipped profiles (once)."""
    return default_predictor()


def _runtime(root: Path, predictor: Predictor, calibrate: bool) -> NodeRuntime:
    config = NodeConfig(regions_dir=root, nvml=False, scan_every=1)
    control = ControlConfig(
        config.adjustment, calibration=CalibrationConfig() if calibrate else None
    )
    return NodeRuntime(config, NodeController(ShareSizer(predictor), control), [0])


def _node(root: Path) -> Path:
    for spec in (LC, BE):
        write_pod(create_region(root / spec.name, Limits((None,), 5000)), spec)
        attach(root / spec.name / USAGE_FILE, os.getpid())
    return root / "lc"


def _serve(runtime: NodeRuntime, reporter: LatencyReporter, ticks: int, slower: float) -> None:
    """``ticks`` periods of 1 s, each with ten batches of 4 taking ``slower`` times what
    the predictor says at the shares in force (beside the BE job)."""
    sizer = runtime.controller.sizer
    root = runtime.config.regions_dir
    for _ in range(ticks):
        mine = Workload(LC.model, 4, read_limits(root / "lc").share_bp / 10_000)
        other = Workload(BE.model, BE.batch, max(read_limits(root / "be").share_bp, 1) / 10_000)
        alone = sizer.predictor.latency_ms(mine.model, 4, mine.share)
        predicted_ms = alone * sizer.slowdown(mine, [other])
        for _ in range(10):
            reporter.report(slower * predicted_ms / 1000.0, batch=4)
        runtime.tick(period_s=1.0)


def test_slow_batches_raise_the_correction_which_is_logged_exported_and_published(
    tmp_path: Path, predictor: Predictor, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batches twice as slow as predicted: the correction climbs to 2, each step of 0.05
    or more is logged, the gauge and the counter show it, calibration.json holds it per
    container and per model (the share it buys: tests/colocation/test_calibration.py)."""
    root = tmp_path / "True"
    calibrated = _runtime(root, predictor, True)
    with LatencyReporter(_node(root)) as reporter:
        calibrated.start()
        _serve(calibrated, reporter, 40, 2.0)
    factor = calibrated.controller.corrections()["lc"]
    assert factor == pytest.approx(2.0, rel=0.05)
    logged = [line for line in capsys.readouterr().err.splitlines() if "calibration: lc" in line]
    assert logged[0].startswith("arkgpu node: calibration: lc (resnet50, GPU 0) 1.00 -> ")
    assert len(logged) >= 5
    assert calibrated.calibration is not None
    assert calibrated.calibration.changes == len(logged)
    published = json.loads((tmp_path / "True" / CALIBRATION_FILE).read_text())
    assert published["services"]["lc"]["model"] == "resnet50"
    assert published["services"]["lc"]["factor"] == pytest.approx(factor, abs=0.06)
    assert published["models"] == {"resnet50": published["services"]["lc"]["factor"]}
    families = {f.name: f for f in RuntimeCollector(calibrated).collect()}
    gauge = families["arkgpu_container_latency_correction_ratio"].samples
    assert [(s.labels["container"], round(s.value, 3)) for s in gauge] == [("lc", round(factor, 3))]
    assert families["arkgpu_node_calibration_changes"].samples[0].value == len(logged)


def test_batches_as_fast_as_predicted_leave_nothing_to_log(
    tmp_path: Path, predictor: Predictor, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-request reports (batch 1) are no evidence: the correction stays 1, no line,
    no file; without calibration there is no gauge."""
    lc = _node(tmp_path)
    runtime = _runtime(tmp_path, predictor, True)
    runtime.start()
    with LatencyReporter(lc) as reporter:
        for _ in range(20):
            for _ in range(40):
                reporter.report(0.040)
            runtime.tick(period_s=1.0)
    assert runtime.controller.corrections() == {}
    assert "calibration" not in capsys.readouterr().err
    assert not (tmp_path / CALIBRATION_FILE).exists()
    plain = _runtime(tmp_path, predictor, False)
    families = {f.name: f for f in RuntimeCollector(plain).collect()}
    assert families["arkgpu_container_latency_correction_ratio"].samples == []


def test_a_restarted_runtime_starts_from_the_published_factors(
    tmp_path: Path, predictor: Predictor
) -> None:
    """The file an earlier runtime published seeds the new one's corrections; a bad
    file is ignored."""
    _node(tmp_path)
    (tmp_path / CALIBRATION_FILE).write_text(
        json.dumps({"services": {"lc": {"model": "resnet50", "gpu": 0, "factor": 1.7}}})
    )
    runtime = _runtime(tmp_path, predictor, True)
    runtime.start()
    assert runtime.controller.corrections()["lc"] == pytest.approx(1.7)
    (tmp_path / CALIBRATION_FILE).write_text("{not json")
    assert read_published(tmp_path / CALIBRATION_FILE) == {}
