"""``arkgpu node bench``: what one control tick costs, and the runtime's CPU use.

In-process, on regions in a temporary folder: ``gpus`` GPUs with
``per_gpu`` containers each (half LC, half BE), each with the bench's own process
attached in its usage file (the runtime adjusts only containers with a live process;
no latency samples are in them, so the LC p99 is unknown and the feedback drains). Figures:

* ``tick_median_ms``, ``tick_p99_ms``: wall time of :meth:`NodeRuntime.tick`
  over ``ticks`` ticks after the rebuild period (reads, decisions, writes).
* ``cpu_share_of_core``: the process's CPU time over wall time while the
  runtime runs its loop at ``period_s`` for ``seconds``.
* ``traffic_tick_median_ms``, ``traffic_tick_p99_ms``: the same ticks while
  every LC container reports one period of latencies before each tick (about
  ``traffic_rps * period_s`` samples, lognormal around 20 ms for a 50 ms target,
  written straight into the latency ring as the limiter does, not timed):
  measured rates and p99s move every period, so the controller sizes afresh
  instead of finding its GPUs settled.
* ``traffic_cpu_share_estimate``: the mean traffic tick over ``period_s`` (the
  loop's own CPU at that period, the scans left out).
* ``lc_requests_seen``: requests the runtime read from the LC containers'
  latency reports (the traffic reached it).
"""

from __future__ import annotations

import ctypes
import os
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.limiter import layout
from arkgpu.limiter.region import USAGE_FILE, Limits, create_region
from arkgpu.limiter.untrusted import start_ticks
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
    traffic_rps: float = 150.0
    """Requests per second each LC container reports in the traffic ticks (its peak)."""
    seed: int = 7
    """Seed of the traffic's sample counts and latencies."""


def _report(usage: Path, latencies_ns: list[int]) -> None:
    """Append ``latencies_ns`` to a usage file's latency ring, as the library does."""
    u = layout.UsageStruct
    entry = ctypes.sizeof(layout.LatencyEntryStruct)
    fd = os.open(usage, os.O_RDWR)
    try:
        (head,) = struct.unpack("<Q", os.pread(fd, 8, u.lat_head.offset))
        now = time.monotonic_ns()
        for k, latency in enumerate(latencies_ns):
            at = u.lat.offset + ((head + k) % layout.LATENCY_SLOTS) * entry
            os.pwrite(fd, struct.pack("<QQQQ", head + k + 1, now, latency, 1), at)
        os.pwrite(fd, struct.pack("<Q", head + len(latencies_ns)), u.lat_head.offset)
    finally:
        os.close(fd)


def _traffic(root: Path, c: NodeBenchConfig, rng: np.random.Generator) -> None:
    """One period of latency reports into every LC container's region."""
    for gpu in range(c.gpus):
        for k in range(0, c.per_gpu, 2):
            n = int(rng.poisson(c.traffic_rps * c.period_s))
            latencies = rng.lognormal(np.log(20e6), 0.4, size=n)
            _report(root / f"g{gpu}-c{k}" / USAGE_FILE, [int(x) for x in latencies])


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
            attach(region / USAGE_FILE, os.getpid())


def attach(usage: Path, pid: int) -> None:
    """Mark ``pid`` attached in a usage file's first process slot, as the library does when
    a process of the container starts (the runtime adjusts only containers with one)."""
    slot = layout.UsageStruct.procs.offset
    fd = os.open(usage, os.O_RDWR)
    try:
        os.pwrite(fd, struct.pack("<i", pid), slot + layout.ProcStruct.pid.offset)
        ticks = struct.pack("<Q", start_ticks(pid))
        os.pwrite(fd, ticks, slot + layout.ProcStruct.start_ticks.offset)
    finally:
        os.close(fd)


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
        times = _ticks(runtime, c.ticks, lambda: None)
        rng = np.random.default_rng(c.seed)
        busy = _ticks(runtime, c.ticks, lambda: _traffic(root, c, rng))
        cpu = _cpu_share(_runtime(root, c), c.seconds)
    return {
        "containers": c.gpus * c.per_gpu,
        "gpus": c.gpus,
        "tick_median_ms": statistics.median(times),
        "tick_p99_ms": _p99(times),
        "period_s": c.period_s,
        "cpu_share_of_core": cpu,
        "traffic_tick_median_ms": statistics.median(busy),
        "traffic_tick_p99_ms": _p99(busy),
        "traffic_cpu_share_estimate": statistics.mean(busy) / 1000.0 / c.period_s,
        "writes": runtime.stats.writes,
        "lc_requests_seen": sum(c.requests for c in runtime.containers.values()),
    }


def _ticks(runtime: NodeRuntime, n: int, before: Callable[[], None]) -> list[float]:
    """Wall time of ``n`` ticks (ms), ``before`` run untimed ahead of each."""
    times = []
    for _ in range(n):
        before()
        start = time.perf_counter()
        runtime.tick()
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def _p99(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _cpu_share(runtime: NodeRuntime, seconds: float) -> float:
    runtime.start()
    runtime.tick()
    runtime.tick()
    wall0, cpu0 = time.monotonic(), time.process_time()
    end = wall0 + seconds
    runtime.run(lambda: time.monotonic() >= end)
    return (time.process_time() - cpu0) / (time.monotonic() - wall0)
