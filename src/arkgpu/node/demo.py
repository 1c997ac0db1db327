"""``arkgpu node demo``: the runtime, one LC and one BE workload on one fake GPU.

Real processes: the runtime (``arkgpu node run``), an LC server
(``arkgpu workload lc``) and a training loop (``arkgpu workload be``), each
container with its own region on the fake GPU under the interception library.
The LC load is stepped: a warm-up, then high, low (half) and high again.
Sampled every ``sample_s``: both containers' written shares and busy time.

Figures (:func:`summarise`):

* ``lc_p99_over_target_max``: per phase, LC p99 over the phase / target.
* ``lc_p95_over_target``: the same with the p95 (the tests' bound: in a 4-s phase the
  p99 rests on 3 to 6 requests, and one stall of the LC server's own process on a
  loaded test machine delays that many at once).
* ``be_busy_share_of_leftover``: BE busy time / (wall time - LC busy time),
  over the three measured phases.
* ``be_share_rise_s``: after the load halves, the time until BE's busy share
  over a trailing ``window_s`` exceeds its mean of the phase before by 2 points.
* ``lc_recover_s``: after the load returns, the end of the last ``window_s``
  window whose p99 is over the target, from the step (0: none).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.limiter import native
from arkgpu.limiter.containers import FakeContainer, container_user, make_world_readable
from arkgpu.limiter.region import Limits, read_limits, read_usage
from arkgpu.node.pods import PodSpec, write_pod

PHASES = ("high", "low", "high_again")
"""The measured phases, in order."""
STARTED_LINE = "arkgpu node: "
"""Start of the line ``arkgpu node run`` prints once its predictor is loaded and its GPUs
found (``arkgpu.node.serving``): from then on it decides every period."""
START_TIMEOUT_S = 180.0
"""Longest wait for the runtime's start line, s: imports and the predictor's fit take about
2 s on an idle machine, about 9 s at a load average of 8 on 2 cores."""


@dataclass(frozen=True)
class DemoConfig:
    """The demo's scenario (units in each field)."""

    model: str = "resnet50"
    """LC model: the runtime sizes its share with the predictor's latency of it, and
    the server's batches take that latency at the share in force."""
    target_ms: float = 50.0
    """LC p99 target, ms."""
    peak_rps: float = 150.0
    """LC rate in the high phases, requests/s (the low phase has half)."""
    max_batch: int = 8
    """LC batcher's largest batch."""
    warmup_s: float = 3.0
    """Time at the high rate before the measured phases, s."""
    phase_s: float = 4.0
    """Length of each measured phase, s."""
    be_kernel_us: float = 1000.0
    """BE iteration kernel, µs."""
    period_s: float = 0.1
    """Runtime control period, s."""
    sample_s: float = 0.1
    """Sampling period of shares and busy time, s."""
    window_s: float = 0.5
    """Trailing window of the rise and recovery figures, s."""
    kill_runtime_at_s: float | None = None
    """SIGKILL the runtime this long after the LC load starts (None: never)."""
    restart_after_s: float = 1.0
    """Start a new runtime this long after the kill, s."""
    kill_be_at_s: float | None = None
    """SIGKILL the BE container's processes this long after the LC load starts (None: never)."""

    @property
    def total_s(self) -> float:
        """LC run length, s."""
        return self.warmup_s + len(PHASES) * self.phase_s


@dataclass
class DemoRun:
    """What one run recorded."""

    samples: list[dict[str, float]] = field(default_factory=list)
    """Per sample: t (s from LC start), lc_bp, be_bp, lent_bp, lc_busy_s, be_busy_s."""
    latencies: list[tuple[float, float]] = field(default_factory=list)
    """(completion time s from LC start, latency s) per request."""
    limits_at_kill: dict[str, Limits] = field(default_factory=dict)
    """Limits when the runtime was killed."""
    limits_before_restart: dict[str, Limits] = field(default_factory=dict)
    """Limits just before the new runtime started."""
    be_iterations: int = 0
    """BE loop iterations."""
    lc_exit: str = ""
    """How the LC server ended: its exit status and the end of its standard error."""
    be_killed_at: float | None = None
    """When the BE container's processes were SIGKILLed, s from LC start (None: never)."""
    restarted_at: float | None = None
    """When the restarted runtime printed its start line, s from LC start (None: never)."""


FAVOURED_NICE = -10
"""Niceness of the demo's processes when we may (root): each has its CPU (a node daemon's
reserved CPU, an inference server's and a training job's own cores), so that a loaded test
machine (other tests at niceness 0) delays GPU work no more than a real node would; the
demo measures GPU sharing, not a loaded CPU."""


def _favour() -> None:
    os.nice(FAVOURED_NICE)


def _favoured() -> Callable[[], None] | None:
    """Raise a child's CPU priority where we may (root)."""
    return _favour if os.geteuid() == 0 else None


def _python() -> list[str]:
    return [sys.executable, "-m", "arkgpu"]


class Demo:
    """The demo's processes in a working folder."""

    def __init__(self, config: DemoConfig, work: Path) -> None:
        """Create the two containers' regions and the runtime's configuration."""
        self.config = config
        self.work = work
        make_world_readable(work)
        self.regions = work / "regions"
        make_world_readable(self.regions)
        state = work / "fakegpu"
        c = config
        self.lc = FakeContainer.create(self.regions / "lc", state, Limits((None,), 5000))
        spec = PodSpec("lc", "lc", 0, c.model, 1024, c.target_ms, c.peak_rps, c.max_batch)
        write_pod(self.lc.region, spec)
        self.be = FakeContainer.create(self.regions / "be", state, Limits((None,), 5000))
        write_pod(self.be.region, PodSpec("be", "be", 0, "vgg16", 2048, batch=32))
        self.toml = work / "node.toml"
        self.toml.write_text(
            f'regions_dir = "{self.regions}"\nnvml = false\nperiod_s = {c.period_s}\n'
        )
        self.runtime: subprocess.Popen[str] | None = None
        self.runtime_log = work / "runtime-0.log"
        self.starts = 0
        self.native: dict[str, str] = {}
        if container_user() is not None:  # kernels run as nobody: stage the native parts
            staged = native.stage(work / "native")
            self.native = {
                native.NATIVE_DIR_ENV: str(staged),
                "LD_LIBRARY_PATH": str(staged / "fake"),
            }

    def start_runtime(self) -> None:
        """Start ``arkgpu node run`` on the demo's configuration, its standard error in
        ``runtime-<n>.log``; favoured (:data:`FAVOURED_NICE`)."""
        self.starts += 1
        self.runtime_log = self.work / f"runtime-{self.starts}.log"
        with self.runtime_log.open("w") as sink:
            self.runtime = subprocess.Popen(
                [*_python(), "node", "run", "--config", str(self.toml)],
                stderr=sink,
                text=True,
                preexec_fn=_favoured(),  # noqa: PLW1509
            )

    def runtime_started(self) -> bool:
        """Whether the runtime started last printed its start line (it decides from now)."""
        return STARTED_LINE in self.runtime_log.read_text()

    def wait_for_runtime(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the runtime started last prints its start line (a loaded machine makes its
        start slow, not a fixed time); RuntimeError with its log when it ends or times out."""
        deadline = time.monotonic() + timeout_s
        while not self.runtime_started():
            assert self.runtime is not None
            ended = self.runtime.poll()
            if ended is not None or time.monotonic() > deadline:
                how = f"exited with {ended}" if ended is not None else f"silent for {timeout_s:g} s"
                log = self.runtime_log.read_text()[-1000:]
                raise RuntimeError(f"the node runtime {how}: {log}")
            time.sleep(0.05)

    def workload(
        self, container: FakeContainer, args: list[str], favoured: bool = False
    ) -> subprocess.Popen[str]:
        """Start a workload of ``container`` (kernels under the limiter); ``favoured``:
        at :data:`FAVOURED_NICE` when we may (root)."""
        return subprocess.Popen(
            [*_python(), "workload", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=container.env(self.native, preload=False),
            text=True,
            start_new_session=True,
            preexec_fn=_favoured() if favoured else None,  # noqa: PLW1509
        )

    def limits(self) -> dict[str, Limits]:
        """Both containers' limits now."""
        return {"lc": read_limits(self.lc.region), "be": read_limits(self.be.region)}

    def sample(self, t: float) -> dict[str, float]:
        """Shares written and busy time of both containers now."""
        lim = self.limits()
        lc_u, be_u = read_usage(self.lc.region), read_usage(self.be.region)
        return {
            "t": t,
            "lc_bp": lim["lc"].share_bp,
            "be_bp": lim["be"].share_bp,
            "lent_bp": sum(lim["be"].lent_bp),
            "lc_busy_s": lc_u.busy_ns[0] / 1e9,
            "be_busy_s": be_u.busy_ns[0] / 1e9,
        }

    def stop(self) -> None:
        """End the runtime (SIGTERM)."""
        if self.runtime is not None and self.runtime.poll() is None:
            self.runtime.terminate()
            self.runtime.wait(timeout=30)


def _rates(c: DemoConfig) -> str:
    steps = [(c.peak_rps, c.warmup_s), (c.peak_rps, c.phase_s)]
    steps += [(c.peak_rps / 2, c.phase_s), (c.peak_rps, c.phase_s)]
    return ",".join(f"{r:g}:{s:g}" for r, s in steps)


def _quiet(message: str) -> None:
    del message


def run_demo(
    config: DemoConfig, work: Path | None = None, progress: Callable[[str], None] = _quiet
) -> DemoRun:
    """Run the demo's processes and record what happened."""
    with tempfile.TemporaryDirectory(prefix="arkgpu-node-demo-") as tmp:
        return _run(config, work or Path(tmp), progress)


def _run(c: DemoConfig, work: Path, progress: Callable[[str], None]) -> DemoRun:
    demo = Demo(c, work)
    out = DemoRun()
    log = work / "lc.jsonl"
    demo.start_runtime()
    demo.wait_for_runtime()  # it loads its predictor (seconds; more on a loaded machine)
    progress("runtime started; starting the LC and BE workloads")
    lc_args = ["lc", "--rates", _rates(c), "--log", str(log), "--max-batch", str(c.max_batch)]
    lc_args += ["--model", c.model]
    be_seconds = f"{c.total_s + 2:g}"
    be = demo.workload(
        demo.be, ["be", "--seconds", be_seconds, "--kernel-us", f"{c.be_kernel_us:g}"], True
    )
    lc = demo.workload(demo.lc, lc_args, favoured=True)
    t0 = time.monotonic()
    try:
        _watch(demo, out, (lc, be), t0)
    finally:
        _, lc_err = lc.communicate(timeout=60)
        out.lc_exit = f"status {lc.returncode}: {lc_err[-2000:]}"
        be_out, _ = be.communicate(timeout=60)
        demo.stop()
    out.be_iterations = _iterations(be_out)
    out.latencies = latencies(log)
    progress("done")
    return out


def _watch(
    demo: Demo, out: DemoRun, workloads: tuple[subprocess.Popen[str], ...], t0: float
) -> None:
    c = demo.config
    lc, be = workloads
    killed_at: float | None = None
    while lc.poll() is None:
        t = time.monotonic() - t0
        out.samples.append(demo.sample(t))
        if c.kill_be_at_s is not None and out.be_killed_at is None and t >= c.kill_be_at_s:
            os.killpg(be.pid, signal.SIGKILL)  # the loop and its kernel runner
            out.be_killed_at = t
        if c.kill_runtime_at_s is not None and killed_at is None and t >= c.kill_runtime_at_s:
            assert demo.runtime is not None
            demo.runtime.send_signal(signal.SIGKILL)
            demo.runtime.wait()
            out.limits_at_kill = demo.limits()
            killed_at = t
        restart = killed_at is not None and t >= killed_at + c.restart_after_s
        if restart and not out.limits_before_restart:
            out.limits_before_restart = demo.limits()
            demo.start_runtime()
        elif restart and out.restarted_at is None and demo.runtime_started():
            out.restarted_at = t
        time.sleep(c.sample_s)


def _iterations(text: str) -> int:
    try:
        return int(json.loads(text.strip().splitlines()[-1])["iterations"])
    except (ValueError, IndexError, KeyError):
        return 0


def latencies(log: Path) -> list[tuple[float, float]]:
    if not log.exists():
        return []
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [(r["t"], r["latency_s"]) for r in rows]


def phase_bounds(c: DemoConfig) -> dict[str, tuple[float, float]]:
    """(start, end) s from LC start of each measured phase."""
    return {
        name: (c.warmup_s + i * c.phase_s, c.warmup_s + (i + 1) * c.phase_s)
        for i, name in enumerate(PHASES)
    }


def lc_percentile(run: DemoRun, start: float, end: float, q: float = 99.0) -> float:
    """The ``q``-th percentile of the LC latencies completed in [start, end), ms (nan: none)."""
    lat = [lat for t, lat in run.latencies if start <= t < end]
    return float(np.percentile(lat, q)) * 1000.0 if lat else float("nan")


def _p99(run: DemoRun, start: float, end: float) -> float:
    return lc_percentile(run, start, end)


def _busy_between(run: DemoRun, key: str, start: float, end: float) -> tuple[float, float]:
    inside = [s for s in run.samples if start <= s["t"] <= end]
    if len(inside) < 2:
        return 0.0, 0.0
    return inside[-1][key] - inside[0][key], inside[-1]["t"] - inside[0]["t"]


def _share(run: DemoRun, key: str, start: float, end: float) -> float:
    busy, wall = _busy_between(run, key, start, end)
    return busy / wall if wall > 0 else 0.0


def summarise(c: DemoConfig, run: DemoRun) -> dict[str, Any]:
    """The demo's figures (see the module docstring)."""
    bounds = phase_bounds(c)
    first, last = bounds["high"][0], bounds["high_again"][1]
    lc_busy, wall = _busy_between(run, "lc_busy_s", first, last)
    be_busy, _ = _busy_between(run, "be_busy_s", first, last)
    return {
        "target_ms": c.target_ms,
        "lc_p99_ms": {k: _p99(run, *b) for k, b in bounds.items()},
        "lc_p99_over_target_max": {k: _p99(run, *b) / c.target_ms for k, b in bounds.items()},
        "lc_p95_over_target": {
            k: lc_percentile(run, *b, 95.0) / c.target_ms for k, b in bounds.items()
        },
        "be_busy_share_of_leftover": be_busy / max(wall - lc_busy, 1e-9),
        "lc_busy_share": lc_busy / max(wall, 1e-9),
        "be_busy_share": be_busy / max(wall, 1e-9),
        "be_share_rise_s": _rise(c, run, *bounds["high"], bounds["low"][0]),
        "lc_recover_s": _recover(c, run, *bounds["high_again"]),
        "be_iterations": run.be_iterations,
    }


def _rise(c: DemoConfig, run: DemoRun, before: float, _end: float, step: float) -> float:
    level = _share(run, "be_busy_s", before + c.window_s, step)
    for s in run.samples:
        if s["t"] < step + c.window_s / 2:
            continue
        if _share(run, "be_busy_s", s["t"] - c.window_s, s["t"]) > level + 0.02:
            return max(0.0, s["t"] - step)
    return float("inf")


def _recover(c: DemoConfig, run: DemoRun, step: float, end: float) -> float:
    worst = 0.0
    t = step
    while t < end:
        if _p99(run, t, t + c.window_s) > c.target_ms:
            worst = t + c.window_s - step
        t += c.window_s / 2
    return worst
