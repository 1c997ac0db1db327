"""``arkgpu node contract-bench``: does every pod of a shared GPU get the share the HAMi
compatibility contract promises it, with the node runtime adjusting the others?

Real processes on one fake GPU, as ``arkgpu node demo`` runs them (the runtime, the
workloads under the interception library): an LC service (``arkgpu.io/qos: lc``, opted
in: the runtime sizes its share), two pods written for HAMi (no class: ``elastic``
false, their ``gpucores`` a cap they keep) running kernels back to back, and one opted-in
BE job, also saturating. Measured over the run after a warm-up, per pod: the busy share
(GPU busy time over wall time, from its usage region) against the share it asked for,
and the share in force at the end.

The contract (docs/MIGRATING-FROM-HAMI.md): a HAMi pod's busy share is its asked share
(a cap it gets whenever it has work: within ``tolerance``); the LC service meets its
target; the BE job gets at most what the others leave.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.limiter.containers import FakeContainer
from arkgpu.limiter.region import Limits, read_limits, read_usage
from arkgpu.node.demo import Demo, DemoConfig, latencies
from arkgpu.node.pods import PodSpec, write_pod

BP = 10_000


@dataclass(frozen=True)
class ContractBenchConfig:
    """The scenario (units in each field)."""

    hami_bp: tuple[int, ...] = (3000, 2000)
    """Shares the HAMi pods ask for (``gpucores`` 30 and 20), basis points."""
    be_bp: int = 1000
    """Share the opted-in BE job starts at, basis points."""
    lc_rps: float = 60.0
    """The LC service's request rate, requests/s."""
    warmup_s: float = 3.0
    """Time before measuring (the runtime fits its predictor, the workloads start), s."""
    measure_s: float = 10.0
    """Measured time, s."""
    kernel_us: float = 1000.0
    """Kernel of the saturating loops, µs."""
    start_timeout_s: float = 120.0
    """Longest wait for every workload's first process and the LC's first request, s (a
    loaded machine starts Python slowly); the warm-up starts after."""


def run_contract_bench(config: ContractBenchConfig, work: Path | None = None) -> dict[str, Any]:
    """Run the scenario; the report (per pod: asked, busy share, share at the end)."""
    with tempfile.TemporaryDirectory(prefix="arkgpu-contract-bench-") as tmp:
        return _run(config, work or Path(tmp))


def _run(c: ContractBenchConfig, work: Path) -> dict[str, Any]:
    demo = Demo(DemoConfig(peak_rps=c.lc_rps), work)  # regions "lc" and "be", the runtime
    write_pod(demo.be.region, PodSpec("be", "be", 0, "vgg16", 1024, elastic=True))
    demo.be.set_limits(Limits((1024 << 20,), c.be_bp))
    hami = [_hami(demo, k, bp) for k, bp in enumerate(c.hami_bp)]
    asked = {"lc": read_limits(demo.lc.region).share_bp, "be": c.be_bp}
    asked |= {f"hami-{k}": bp for k, bp in enumerate(c.hami_bp)}
    run_s = c.start_timeout_s + c.warmup_s + c.measure_s + 5  # stopped once measured
    seconds = f"{run_s:g}"
    loop = ["be", "--seconds", seconds, "--kernel-us", f"{c.kernel_us:g}"]
    demo.start_runtime()
    demo.wait_for_runtime()  # it loads its predictor (seconds; more on a loaded machine)
    rates = f"{c.lc_rps:g}:{run_s:g}"
    log = work / "lc.jsonl"
    lc_args = ["lc", "--rates", rates, "--model", "resnet50", "--log", str(log)]
    procs = [demo.workload(demo.lc, lc_args, True)]
    procs += [demo.workload(container, loop) for container in (demo.be, *hami)]
    regions = {"lc": demo.lc.region, "be": demo.be.region}
    regions |= {f"hami-{k}": h.region for k, h in enumerate(hami)}
    try:
        _wait_started(regions, log, c.start_timeout_s)
        time.sleep(c.warmup_s)
        lc_warm = max((t for t, _ in latencies(log)), default=0.0)
        start = _busy(regions), time.monotonic()
        time.sleep(c.measure_s)
        end = _busy(regions), time.monotonic()
        final = {name: read_limits(region).share_bp for name, region in regions.items()}
    finally:
        _stop(procs)
        demo.stop()
    wall = end[1] - start[1]
    measured = [lat for t, lat in latencies(log) if t >= lc_warm]
    p99 = float(np.percentile(measured, 99)) * 1e3 if measured else float("nan")
    return {
        "measured_s": round(wall, 2),
        "lc_target_ms": demo.config.target_ms,
        "lc_p99_ms": round(p99, 2),
        "lc_requests": len(measured),
        "pods": {
            name: {
                "class": "hami" if name.startswith("hami") else name,
                "asked_share": asked[name] / BP,
                "busy_share": round((end[0][name] - start[0][name]) / wall, 4),
                "share_at_end": final[name] / BP,
            }
            for name in regions
        },
    }


def _hami(demo: Demo, k: int, share_bp: int) -> FakeContainer:
    region = demo.regions / f"hami-{k}"
    limits = Limits((1024 << 20,), share_bp)
    container = FakeContainer.create(region, demo.work / "fakegpu", limits)
    write_pod(region, PodSpec(f"hami-{k}", "be", 0, "unknown", 1024, elastic=False))
    return container


def _wait_started(regions: dict[str, Path], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = all(any(p.alive for p in read_usage(r).processes) for r in regions.values())
        if running and log.exists() and log.stat().st_size > 0:
            return
        time.sleep(0.2)
    raise TimeoutError(f"the workloads did not all start within {timeout_s:g} s")


def _busy(regions: dict[str, Path]) -> dict[str, float]:
    return {name: read_usage(region).busy_ns[0] / 1e9 for name, region in regions.items()}


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
