"""Results of one co-location run: per-application counters, system metrics, time series.

Every figure here is simulated on measured V100 profiles (iGniter); see
docs/COLOCATION.md for the definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class LcResult:
    """One LC service over the run."""

    name: str
    """Service name."""
    model: str
    """DNN model."""
    target_ms: float
    """p99 latency target."""
    state: str
    """Pod state at the end (running, pending, failed)."""
    arrived: int
    """Requests that arrived in the horizon."""
    completed: int
    """Requests completed."""
    good: int
    """Requests completed within the target."""
    lost: int
    """Requests lost in faults."""
    unserved: int
    """Requests still queued or executing at the end (never completed)."""
    p99_ms: float
    """p99 latency (ms) of the completed requests; NaN when none."""

    @property
    def slo_attainment_pct(self) -> float:
        """Requests within target over requests arrived (unserved ones count as misses), %."""
        return 100.0 * self.good / self.arrived if self.arrived else 100.0


@dataclass(frozen=True)
class BeResult:
    """One BE job over the run."""

    name: str
    """Job name."""
    model: str
    """DNN model trained."""
    state: str
    """Pod state at the end (running, pending, failed, finished)."""
    iterations: float
    """Iterations done."""
    solo_rate: float
    """Iterations/s of the same job alone on a whole GPU (ground truth)."""
    finished_at: float | None
    """Time (s) it finished, if it did."""
    length: int
    """Iterations the job has in all."""


@dataclass(frozen=True)
class Series:
    """Per-period time series (rows: control periods)."""

    t: NDArray[np.float64]
    """End time (s) of each period."""
    lc_names: tuple[str, ...]
    """Column names of the LC arrays."""
    lc_load_rps: NDArray[np.float64]
    """Measured arrival rate per LC service."""
    lc_share: NDArray[np.float64]
    """Compute share (or limit) per LC service."""
    lc_p99_ms: NDArray[np.float64]
    """p99 latency in the period per LC service (NaN: nothing completed)."""
    lc_target_ms: NDArray[np.float64]
    """Target per LC service (one row)."""
    be_names: tuple[str, ...]
    """Column names of the BE arrays."""
    be_share: NDArray[np.float64]
    """Share (or rate limit) per BE job."""
    be_rate: NDArray[np.float64]
    """Iterations/s per BE job."""


@dataclass(frozen=True)
class RunResult:
    """Outcome of one scenario under one mode and seed."""

    scenario: str
    """Scenario name."""
    mode: str
    """Sharing mode."""
    seed: int
    """Random seed."""
    duration_s: float
    """Simulated horizon (s)."""
    gpus: int
    """GPUs in the scenario."""
    lcs: tuple[LcResult, ...]
    """LC services."""
    bes: tuple[BeResult, ...]
    """BE jobs."""
    gpu_util_pct: float
    """Mean over GPUs and time of the busy fraction (some kernel running), %."""
    gpus_used: int
    """GPUs that hosted at least one pod at some time."""
    events: int
    """Events handled (cost)."""
    wall_s: float
    """Wall-clock seconds the run took."""
    cpu_s: float
    """CPU seconds the run took (less sensitive than wall time to a loaded machine)."""
    series: Series | None = field(default=None, repr=False)
    """Time series, when recorded."""

    @property
    def goodput_rps(self) -> float:
        """LC requests completed within target per second, all services."""
        return sum(r.good for r in self.lcs) / self.duration_s

    @property
    def lc_throughput_rps(self) -> float:
        """LC requests completed per second, all services."""
        return sum(r.completed for r in self.lcs) / self.duration_s

    @property
    def slo_attainment_min_pct(self) -> float:
        """Lowest SLO attainment of any LC service, %."""
        return min((r.slo_attainment_pct for r in self.lcs), default=100.0)

    @property
    def be_iterations_per_s(self) -> float:
        """BE iterations per second, all jobs."""
        return sum(b.iterations for b in self.bes) / self.duration_s

    def be_norms(self) -> dict[str, float]:
        """Each BE job's iterations over what it does alone on a whole GPU in the horizon."""
        return {b.name: _be_norm(b, self.duration_s) for b in self.bes}

    @property
    def be_throughput_norm(self) -> float:
        """Sum over BE jobs of their normalised throughput (whole-GPU equivalents)."""
        return sum(self.be_norms().values())

    def normalized_goodput(self, lc_alone_good: Mapping[str, float]) -> float:
        """Sum over applications of goodput over the application's goodput alone on a whole GPU."""
        lc = sum(r.good / lc_alone_good[r.name] for r in self.lcs if lc_alone_good[r.name] > 0)
        return lc + self.be_throughput_norm

    def summary(self, lc_alone_good: Mapping[str, float]) -> dict[str, Any]:
        """Headline figures as JSON-ready values."""
        return {
            "goodput_rps": self.goodput_rps,
            "normalized_goodput": self.normalized_goodput(lc_alone_good),
            "slo_attainment_min_pct": self.slo_attainment_min_pct,
            "lc_throughput_rps": self.lc_throughput_rps,
            "be_throughput_norm": self.be_throughput_norm,
            "be_iterations_per_s": self.be_iterations_per_s,
            "gpus_used": self.gpus_used,
            "gpu_util_pct": self.gpu_util_pct,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
        }

    def to_dict(self, lc_alone_good: Mapping[str, float]) -> dict[str, Any]:
        """Summary plus per-application rows."""
        out = {"scenario": self.scenario, "mode": self.mode, "seed": self.seed}
        out.update(self.summary(lc_alone_good))
        out["lc"] = [
            {
                "name": r.name,
                "model": r.model,
                "state": r.state,
                "target_ms": r.target_ms,
                "arrived": r.arrived,
                "good": r.good,
                "completed": r.completed,
                "slo_attainment_pct": r.slo_attainment_pct,
                "p99_ms": None if np.isnan(r.p99_ms) else r.p99_ms,
            }
            for r in self.lcs
        ]
        norms = self.be_norms()
        out["be"] = [
            {
                "name": b.name,
                "model": b.model,
                "state": b.state,
                "iterations": b.iterations,
                "throughput_norm": norms[b.name],
            }
            for b in self.bes
        ]
        return out


def _be_norm(b: BeResult, duration_s: float) -> float:
    """Iterations over those it does alone on a whole GPU in the horizon (capped by its length)."""
    alone = min(float(b.length), b.solo_rate * duration_s)
    return b.iterations / alone if alone > 0 else 0.0
