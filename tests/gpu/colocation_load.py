"""The pure parts of the GPU co-location check (tests/gpu/colocation_torch.py).

No torch here: the load (Poisson arrivals whose rate steps down and up), the
dynamic batcher's decision, and the figures computed from what the two runs
recorded. tests/node/test_gpu_colocation.py checks them on the CPU.

Times are seconds from the start of the LC load (``t0``), latencies seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

PHASES = ("high", "low", "high_again")
"""The measured phases, in order (a warm-up at the high rate comes first)."""


@dataclass(frozen=True)
class LoadConfig:
    """The LC service and its load (the defaults fit the run in about a minute per mode)."""

    peak_rps: float = 300.0
    """Request rate of the high phases, requests/s."""
    low_factor: float = 0.5
    """Rate of the low phase as a fraction of the peak (the step down)."""
    warmup_s: float = 6.0
    """Time at the peak rate before the measured phases, s (not counted)."""
    phase_s: float = 12.0
    """Length of each measured phase, s."""
    target_ms: float = 30.0
    """LC p99 latency target, ms."""
    max_batch: int = 16
    """Largest batch the dynamic batcher forms."""
    max_queue_delay_ms: float = 2.0
    """Longest the oldest queued request waits for a batch to fill, ms."""
    window_s: float = 1.0
    """Window of the p99-over-time series, s."""
    seed: int = 1
    """Seed of the arrivals."""

    def __post_init__(self) -> None:
        """Refuse values no run can use (one line naming the field)."""
        checks = {
            "peak_rps": self.peak_rps > 0,
            "low_factor": 0 < self.low_factor <= 1,
            "warmup_s": self.warmup_s >= 0,
            "phase_s": self.phase_s > 0,
            "target_ms": self.target_ms > 0,
            "max_batch": self.max_batch >= 1,
            "max_queue_delay_ms": self.max_queue_delay_ms >= 0,
            "window_s": self.window_s > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"{name}: out of range ({getattr(self, name)!r})")

    @property
    def total_s(self) -> float:
        """Length of the load, s."""
        return self.warmup_s + len(PHASES) * self.phase_s

    def segments(self) -> list[tuple[str, float, float, float]]:
        """(phase, start s, end s, rate requests/s), warm-up first."""
        rates = (self.peak_rps, self.peak_rps * self.low_factor, self.peak_rps)
        out = [("warmup", 0.0, self.warmup_s, self.peak_rps)]
        for k, (name, rate) in enumerate(zip(PHASES, rates, strict=True)):
            start = self.warmup_s + k * self.phase_s
            out.append((name, start, start + self.phase_s, rate))
        return out


def arrival_times(config: LoadConfig, rng: np.random.Generator) -> NDArray[np.float64]:
    """Arrival times of a Poisson process at each segment's rate, sorted (s)."""
    parts = []
    for _, start, end, rate in config.segments():
        count = rng.poisson(rate * (end - start))
        parts.append(np.sort(rng.uniform(start, end, size=count)))
    return np.concatenate(parts) if parts else np.zeros(0)


def batch_due(waiting: Sequence[float], now: float, max_batch: int, delay_s: float) -> int:
    """How many of the queued requests (arrival times, oldest first) to run now:
    a full batch when that many wait, all of them (up to a batch) once the oldest
    has waited ``delay_s``, else none."""
    if not waiting:
        return 0
    if len(waiting) >= max_batch or now - waiting[0] >= delay_s:
        return min(len(waiting), max_batch)
    return 0


def wake_at(waiting: Sequence[float], next_arrival: float, delay_s: float) -> float:
    """When the batcher next has something to decide: the next arrival, or the
    oldest queued request's deadline, whichever comes first."""
    return min(next_arrival, waiting[0] + delay_s) if waiting else next_arrival


@dataclass
class RunRecord:
    """What one mode's run recorded (s from t0)."""

    arrivals: list[float] = field(default_factory=list)
    """Arrival time of each completed request."""
    completions: list[float] = field(default_factory=list)
    """Completion time of each request (same order)."""
    be_stamps: list[float] = field(default_factory=list)
    """End of each training iteration."""
    shares: list[tuple[float, int, int]] = field(default_factory=list)
    """(t, LC share bp, BE share bp) as the runtime wrote them (arkgpu mode only)."""


def _p99_ms(latencies: NDArray[np.float64]) -> float | None:
    return float(np.percentile(latencies, 99)) * 1000.0 if latencies.size else None


def windows(config: LoadConfig, run: RunRecord) -> list[dict[str, Any]]:
    """LC p99 per window of completions (over the whole load), and training iterations/s."""
    done = np.asarray(run.completions)
    latency = done - np.asarray(run.arrivals)
    stamps = np.asarray(run.be_stamps)
    out = []
    for k in range(math.ceil(config.total_s / config.window_s)):
        lo, hi = k * config.window_s, (k + 1) * config.window_s
        mask = (done >= lo) & (done < hi)
        p99 = _p99_ms(latency[mask])
        out.append(
            {
                "t_end": hi,
                "requests": int(mask.sum()),
                "p99_ms": p99,
                "p99_over_target": None if p99 is None else p99 / config.target_ms,
                "be_iters_per_s": float(((stamps >= lo) & (stamps < hi)).sum()) / config.window_s,
            }
        )
    return out


def phase_figures(config: LoadConfig, run: RunRecord) -> dict[str, dict[str, Any]]:
    """Per measured phase (requests by arrival): p99 / target, SLO attainment, requests,
    and training iterations/s over the phase."""
    arrived = np.asarray(run.arrivals)
    latency = np.asarray(run.completions) - arrived
    stamps = np.asarray(run.be_stamps)
    bound = config.target_ms / 1000.0
    out = {}
    for name, start, end, _ in config.segments()[1:]:
        mine = latency[(arrived >= start) & (arrived < end)]
        p99 = _p99_ms(mine)
        out[name] = {
            "requests": int(mine.size),
            "p99_ms": p99,
            "p99_over_target": None if p99 is None else p99 / config.target_ms,
            "slo_attainment": float((mine <= bound).mean()) if mine.size else None,
            "be_iters_per_s": float(((stamps >= start) & (stamps < end)).sum()) / (end - start),
        }
    return out


def overall(config: LoadConfig, run: RunRecord) -> dict[str, Any]:
    """Over the three measured phases: SLO attainment, p99 / target, iterations/s."""
    start, end = config.warmup_s, config.total_s
    arrived = np.asarray(run.arrivals)
    latency = (np.asarray(run.completions) - arrived)[(arrived >= start) & (arrived < end)]
    stamps = np.asarray(run.be_stamps)
    p99 = _p99_ms(latency)
    return {
        "requests": int(latency.size),
        "slo_attainment": float((latency <= config.target_ms / 1000.0).mean())
        if latency.size
        else None,
        "p99_over_target": None if p99 is None else p99 / config.target_ms,
        "be_iters_per_s": float(((stamps >= start) & (stamps < end)).sum()) / (end - start),
    }


def summarise(config: LoadConfig, runs: dict[str, RunRecord]) -> dict[str, Any]:
    """The figures of every mode's run, and the arkgpu-over-time-slicing comparison."""
    report: dict[str, Any] = {"config": asdict(config), "modes": {}}
    for mode, run in runs.items():
        report["modes"][mode] = {
            "overall": overall(config, run),
            "phases": phase_figures(config, run),
            "windows": windows(config, run),
        }
    if {"timeslice", "arkgpu"} <= runs.keys():
        a, t = report["modes"]["arkgpu"]["overall"], report["modes"]["timeslice"]["overall"]
        ratio = a["be_iters_per_s"] / t["be_iters_per_s"] if t["be_iters_per_s"] else None
        report["comparison"] = {
            "slo_attainment": {"timeslice": t["slo_attainment"], "arkgpu": a["slo_attainment"]},
            "p99_over_target": {
                "timeslice": t["p99_over_target"],
                "arkgpu": a["p99_over_target"],
            },
            "be_iters_per_s_arkgpu_over_timeslice": ratio,
        }
    return report


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The report as a short table (one line per mode and phase)."""
    lines = [
        f"{'mode':10s} {'phase':11s} {'requests':>8s} {'p99/target':>10s} "
        f"{'SLO':>6s} {'BE it/s':>8s}"
    ]
    for mode, figures in report["modes"].items():
        rows = [*figures["phases"].items(), ("overall", figures["overall"])]
        for phase, f in rows:
            ratio = "-" if f["p99_over_target"] is None else f"{f['p99_over_target']:.2f}"
            slo = "-" if f["slo_attainment"] is None else f"{f['slo_attainment']:.3f}"
            lines.append(
                f"{mode:10s} {phase:11s} {f['requests']:8d} {ratio:>10s} {slo:>6s} "
                f"{f['be_iters_per_s']:8.2f}"
            )
    return lines
