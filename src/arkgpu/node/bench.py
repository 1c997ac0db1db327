"""``arkgpu node bench``: what one control tick costs, and the runtime's CPU use.

In-process, on regions in a temporary folder: ``gpus`` GPUs with
``per_gpu`` containers each (half LC, half BE), no container processes (the
usage files are read, no latency samples are in them, so the LC p99 is
unknown and the feedback drains). Figures:

* ``tick_median_ms``, ``tick_p99_ms``: wall time of :meth:`NodeRuntime.tick`
  over ``ticks`` ticks after the rebuild period (reads, decisions, writes).
* ``cpu_share_of_core``: the process's CPU time over wall time while the
  runtime runs its loop at ``period_s`` for ``seconds``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.limiter.region import Limits, create_region
from arkgpu.node.config import NodeConfig
from arkgpu.node.pods import PodSpec, write_pod
from arkgpu.node.runtime import NodeRuntime
from arkgpu.predictor import default_predictor


@dataclass(frozen=True)
class NodeBenchConfig:
    """Size and length of ``arkgpu node bench``."""

    gpus: int = 8
    """GPUs on the node (the issue's 8)."""
    per_gpu: int = 8
    """Containers per GPU (64 in all), half LC and half BE."""
    ticks: int = 200
    """Ticks timed."""
    period_s: float = 0.1
    """Control period of the CPU run, s."""
    seconds: float = 10.0
    """Length of the CPU run, s."""


def _regions(root: Path, c: NodeBenchConfig) -> None:
    for gpu in range(c.gpus):
        for k in range(c.per_gpu):
            name = f"g{gpu}-c{k}"
            region = create_region(root / name, Limits((None,), 10_000 // c.per_gpu))
            if k % 2 == 0:
                spec = PodSpec(name, "lc", gpu, "resnet50", 1024, 50.0, 100.0)
            else:
                spec = PodSpec(name, "be", gpu, "vgg16", 2048)
            write_pod(region, spec)


def _runtime(root: Path, c: NodeBenchConfig) -> NodeRuntime:
    config = NodeConfig(regions_dir=root, nvml=False, gpus=c.gpus, period_s=c.period_s)
    controller = NodeController(ShareSizer(default_predictor()), ControlConfig())
    return NodeRuntime(config, controller, list(range(c.gpus)))


def run_node_bench(c: NodeBenchConfig) -> dict[str, Any]:
    """Run both measurements; the report as a JSON-ready dict."""
    with tempfile.TemporaryDirectory(prefix="arkgpu-node-bench-") as tmp:
        root = Path(tmp)
        _regions(root, c)
        runtime = _runtime(root, c)
        runtime.start()
        runtime.tick()  # the rebuild period
        runtime.tick()  # tables of the predictor built
        times = []
        for _ in range(c.ticks):
            start = time.perf_counter()
            runtime.tick()
            times.append((time.perf_counter() - start) * 1000.0)
        cpu = _cpu_share(_runtime(root, c), c.seconds)
    times.sort()
    return {
        "containers": c.gpus * c.per_gpu,
        "gpus": c.gpus,
        "tick_median_ms": statistics.median(times),
        "tick_p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))],
        "period_s": c.period_s,
        "cpu_share_of_core": cpu,
        "writes": runtime.stats.writes,
    }


def _cpu_share(runtime: NodeRuntime, seconds: float) -> float:
    runtime.start()
    runtime.tick()
    runtime.tick()
    wall0, cpu0 = time.monotonic(), time.process_time()
    end = wall0 + seconds
    runtime.run(lambda: time.monotonic() >= end)
    return (time.process_time() - cpu0) / (time.monotonic() - wall0)
