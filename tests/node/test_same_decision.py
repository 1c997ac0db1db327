"""The simulator's arkgpu mode and the runtime decide alike for the same measurements.

The runtime reads latency reports from a region and writes limits; the
simulator's path builds each observation with ``observe_lc`` from the same
latencies and asks a controller built as the ``arkgpu`` mode builds it
(``NodeController(sizer, ControlConfig(lend_idle_share=True))``). The limits
written must equal ``limits_for`` of the simulator-side decision, period after period.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from arkgpu.client import LatencyReporter
from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.limiting import limits_for
from arkgpu.colocation.observations import BeObservation, GpuObservations, observe_lc
from arkgpu.limiter.region import USAGE_FILE, Limits, create_region, read_limits
from arkgpu.node.bench import attach
from arkgpu.node.config import NodeConfig
from arkgpu.node.pods import PodSpec, write_pod
from arkgpu.node.runtime import NodeRuntime
from arkgpu.sim.colocation.running import make_sizer

LC = PodSpec("lc", "lc", 0, "resnet50", 1024, target_ms=50.0, peak_rps=150.0)
BE = PodSpec("be", "be", 0, "vgg16", 2048)
PERIOD_S = 0.1


def test_runtime_and_simulator_controllers_write_the_same_limits(tmp_path: Path) -> None:
    """Three periods of measured latencies (low, over target, low): same limits both ways."""
    sizer = make_sizer()
    runtime = NodeRuntime(
        NodeConfig(regions_dir=tmp_path, nvml=False),
        NodeController(sizer, ControlConfig(lend_idle_share=True)),
        [0],
    )
    runtime.start()  # nothing yet: the containers arrive later, as new pods do
    regions = {}
    for spec in (LC, BE):
        regions[spec.name] = create_region(tmp_path / spec.name, Limits((None,)))
        write_pod(regions[spec.name], spec)
        attach(regions[spec.name] / USAGE_FILE, os.getpid())
    runtime.scan()
    sim = NodeController(make_sizer(), ControlConfig(lend_idle_share=True))
    rng = np.random.default_rng(3)
    with LatencyReporter(regions["lc"]) as reporter:
        for scale_ms in (10.0, 60.0, 12.0):
            latencies = rng.exponential(scale_ms / 1000.0, size=12)
            for latency in latencies:
                reporter.report(float(latency), 1)
            runtime.tick(PERIOD_S)
            lc = observe_lc(
                "lc",
                LC,
                arrived=12,
                period_s=PERIOD_S,
                latencies_s=[latencies],
                queued=0,
                memory_mib=1024,
            )
            decision = sim.tick(
                GpuObservations(0, (lc,), (BeObservation("be", "vgg16", 32, 2048),))
            )
            for entry in decision.containers():
                written = read_limits(regions[entry.name])
                assert written == replace(limits_for(entry), mode=written.mode), entry
