"""``arkgpu limiter bench``: the limiter's overhead and accuracy on the fake GPU.

Everything runs as real processes: ``arkgpu-cubench`` loads the fake driver
with and without the interception library. Figures:

- ``launch_overhead_ns``: median ns per cuLaunchKernel (zero-length kernel, no
  pacing: share 100) with the library minus without it.
- ``memcall_overhead_ns``: the same per memory call (cuMemAlloc + cuMemFree pairs, halved).
- ``share_error_pts_max``: the largest |achieved busy share - share| in
  percentage points over hard-mode shares, alone and beside a busy co-runner
  container whose share is the rest of the GPU (the co-runner's error counts too).
- ``share_change_latency_ms``: the longest time from writing a new share into
  the region until the busy share over the trailing window is within 5 points
  of it.
"""

from __future__ import annotations

import bisect
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from arkgpu.limiter import native
from arkgpu.limiter.containers import FakeContainer, make_world_readable
from arkgpu.limiter.region import Limits, Mode
from arkgpu.model.shares import share_bp


@dataclass(frozen=True)
class BenchConfig:
    """What ``arkgpu limiter bench`` measures and for how long."""

    shares: tuple[float, ...] = (10.0, 30.0, 50.0, 70.0, 90.0)
    """Hard-mode shares tried, percent: the issue's five."""
    seconds: float = 3.0
    """Length of each share run, s: 3000 one-millisecond kernels per run."""
    kernel_us: float = 1000.0
    """Kernel length, µs: a typical inference kernel batch, long next to the 20 ms bucket."""
    launch_calls: int = 200_000
    """Launches per timed overhead run (seven runs, median)."""
    mem_calls: int = 100_000
    """Allocate/free pairs per timed overhead run (seven runs, median)."""
    repeats: int = 5
    """Alternating with/without-library overhead pairs."""
    changes: tuple[tuple[float, float], ...] = ((20.0, 80.0), (80.0, 20.0))
    """Share changes (from, to) timed, percent."""
    change_window_ms: float = 20.0
    """Trailing window over which the share after a change is measured, ms."""
    elastic_share: float = 30.0
    """Share of the elastic-mode cases, percent."""


@dataclass
class LoadResult:
    """One ``arkgpu-cubench load`` run: busy share and per-launch samples."""

    share: float
    t_ns: list[int] = field(default_factory=list)
    busy_at: list[int] = field(default_factory=list)

    def window_share(self, start_ns: int, end_ns: int) -> float:
        """Busy share between two CLOCK_MONOTONIC times, from the nearest samples."""
        i = max(bisect.bisect_left(self.t_ns, start_ns) - 1, 0)
        j = min(bisect.bisect_left(self.t_ns, end_ns), len(self.t_ns) - 1)
        if j <= i:
            return 0.0
        return (self.busy_at[j] - self.busy_at[i]) / (self.t_ns[j] - self.t_ns[i])

    def first_within(
        self, since_ns: int, window_ns: int, done: Callable[[float], bool]
    ) -> float | None:
        """ms from ``since_ns`` until the busy share (percent) over the trailing
        ``window_ns`` first satisfies ``done``; None if it never does."""
        for t in self.t_ns:
            if t >= since_ns + window_ns and done(100 * self.window_share(t - window_ns, t)):
                return (t - since_ns) / 1e6
        return None


def start_load(
    box: FakeContainer, seconds: float, kernel_us: float, path: str = "kernel"
) -> subprocess.Popen[str]:
    """Start a process launching ``kernel_us`` kernels back to back."""
    return box.popen([str(native.cubench()), "load", str(seconds), str(kernel_us), path])


def finish_load(proc: subprocess.Popen[str]) -> LoadResult:
    """Wait for a load process and parse its report."""
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"arkgpu-cubench load failed ({proc.returncode}): {err.strip()}")
    data = json.loads(out)
    if data["error"]:
        raise RuntimeError(f"arkgpu-cubench load: launch returned CUDA error {data['error']}")
    return LoadResult(float(data["share"]), list(data["t_ns"]), list(data["busy_at"]))


def timed_calls(box: FakeContainer, mode: str, calls: int, preload: bool = True) -> float:
    """ns per call (``launch``) or per allocate/free pair (``mem``), median of
    ``arkgpu-cubench``'s seven runs, in ``box`` with or without the library."""
    out = subprocess.run(
        [str(native.cubench()), mode, str(calls)],
        capture_output=True,
        text=True,
        env=box.env(preload=preload),
        user=box.user,
        timeout=600,
        check=True,
    )
    data = json.loads(out.stdout)
    return float(data["ns_per_call" if mode == "launch" else "ns_per_pair"])


class Bench:
    """Runs the cases in one work directory, each container on one fake GPU."""

    def __init__(self, config: BenchConfig, workdir: Path, progress: Callable[[str], None]) -> None:
        self.config, self.workdir, self.progress = config, workdir, progress
        self._count = 0
        make_world_readable(workdir)

    def container(self, share: float, mode: Mode = Mode.HARD) -> FakeContainer:
        """A new container with no memory cap and this compute share."""
        self._count += 1
        return FakeContainer.create(
            self.workdir / f"c{self._count}",
            self.workdir / "fakegpu",
            Limits((None,), share_bp(share / 100), mode),
        )

    def overhead(self, mode: str, calls: int, per: float) -> dict[str, object]:
        """Median added ns per call, library against none, alternating runs."""
        box = self.container(100.0)
        diffs = []
        for _ in range(self.config.repeats):
            base = timed_calls(box, mode, calls, preload=False)
            hooked = timed_calls(box, mode, calls, preload=True)
            diffs.append(
                {
                    "without_ns": base / per,
                    "with_ns": hooked / per,
                    "added_ns": (hooked - base) / per,
                }
            )
        return {"median": statistics.median(d["added_ns"] for d in diffs), "cases": diffs}

    def shares(self) -> dict[str, object]:
        """Achieved busy share, hard mode, alone and beside a busy co-runner."""
        cfg, cases = self.config, []
        for share in cfg.shares:
            self.progress(f"share {share:g}% alone")
            alone = finish_load(start_load(self.container(share), cfg.seconds, cfg.kernel_us))
            self.progress(f"share {share:g}% beside a co-runner at {100 - share:g}%")
            procs = [
                start_load(self.container(s), cfg.seconds, cfg.kernel_us)
                for s in (share, 100 - share)
            ]
            mine, other = (finish_load(p) for p in procs)
            cases.append(
                {
                    "share_pct": share,
                    "alone_pct": 100 * alone.share,
                    "beside_pct": 100 * mine.share,
                    "corunner_share_pct": 100 - share,
                    "corunner_pct": 100 * other.share,
                }
            )
        errors = [abs(c[k] - c["share_pct"]) for c in cases for k in ("alone_pct", "beside_pct")]
        errors += [abs(c["corunner_pct"] - c["corunner_share_pct"]) for c in cases]
        return {"max": max(errors), "cases": cases}

    def elastic(self) -> dict[str, object]:
        """Elastic mode alone (uses the idle GPU) and beside a hard co-runner."""
        cfg, share = self.config, self.config.elastic_share
        self.progress(f"elastic {share:g}% alone and beside a hard co-runner")
        alone = finish_load(
            start_load(self.container(share, Mode.ELASTIC), cfg.seconds, cfg.kernel_us)
        )
        procs = [
            start_load(self.container(share, Mode.ELASTIC), cfg.seconds, cfg.kernel_us),
            start_load(self.container(100 - share), cfg.seconds, cfg.kernel_us),
        ]
        mine, other = (finish_load(p) for p in procs)
        return {
            "share_pct": share,
            "alone_pct": 100 * alone.share,
            "beside_pct": 100 * mine.share,
            "corunner_hard_share_pct": 100 - share,
            "corunner_pct": 100 * other.share,
        }

    def change(self, before: float, after: float) -> dict[str, object]:
        """Time from writing a new share until the trailing-window share is within 5 points."""
        cfg = self.config
        self.progress(f"share change {before:g}% -> {after:g}%")
        box = self.container(before)
        proc = start_load(box, 1.6, cfg.kernel_us)
        time.sleep(0.7)
        written = time.monotonic_ns()
        box.set_limits(Limits((None,), share_bp(after / 100)))
        result = finish_load(proc)
        window = int(cfg.change_window_ms * 1e6)
        latency = result.first_within(
            written,
            window,
            (lambda s: s >= after - 5) if after > before else (lambda s: s <= after + 5),
        )
        return {
            "from_pct": before,
            "to_pct": after,
            "latency_ms": latency,
            "window_ms": cfg.change_window_ms,
        }


def run_bench(
    config: BenchConfig, progress: Callable[[str], None] = lambda _: None
) -> dict[str, object]:
    """Run every case and return the report (the ``--json`` document)."""
    with tempfile.TemporaryDirectory(prefix="arkgpu-bench-") as tmp:
        bench = Bench(config, Path(tmp), progress)
        progress("launch overhead")
        launch = bench.overhead("launch", config.launch_calls, 1.0)
        progress("memory call overhead")
        mem = bench.overhead("mem", config.mem_calls, 2.0)
        shares = bench.shares()
        elastic = bench.elastic()
        changes = [bench.change(a, b) for a, b in config.changes]
    latencies = [cast(float | None, c["latency_ms"]) for c in changes]
    return {
        "machine": "fake GPU (arkgpu fake libcuda.so.1), real processes",
        "kernel_us": config.kernel_us,
        "seconds_per_case": config.seconds,
        "launch_overhead_ns": launch["median"],
        "launch_overhead_cases": launch["cases"],
        "memcall_overhead_ns": mem["median"],
        "memcall_overhead_cases": mem["cases"],
        "share_error_pts_max": shares["max"],
        "share_cases": shares["cases"],
        "elastic": elastic,
        "share_change_latency_ms": None
        if None in latencies
        else max(x for x in latencies if x is not None),
        "share_change_cases": changes,
    }


def plot_report(report: dict[str, Any], path: Path) -> None:
    """Achieved against set share, alone and beside a co-runner, as a PNG."""
    from matplotlib.figure import Figure  # noqa: PLC0415 (the plots extra; only --plot needs it)

    cases = report["share_cases"]
    shares = [c["share_pct"] for c in cases]
    fig = Figure(figsize=(5, 4))
    ax = fig.subplots()
    ax.plot([0, 100], [0, 100], color="grey", linewidth=0.8, label="target")
    ax.plot(shares, [c["alone_pct"] for c in cases], "o", label="alone")
    ax.plot(shares, [c["beside_pct"] for c in cases], "x", label="beside a busy co-runner")
    ax.plot(
        [c["corunner_share_pct"] for c in cases],
        [c["corunner_pct"] for c in cases],
        "+",
        label="the co-runner",
    )
    ax.set_xlabel("compute share set (%)")
    ax.set_ylabel("achieved busy share (%)")
    ax.set_title(f"hard mode on the fake GPU, max error {report['share_error_pts_max']:.2f} pts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
