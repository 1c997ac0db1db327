"""Latency statistics of one measured point (pure)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Summary of the measured batch latencies of one workload at one point."""

    median_ms: float
    """Median batch latency, ms: the profile's ``latency_ms``."""
    p99_ms: float
    """99th percentile, ms (nearest rank: with fewer than 100 batches, the largest)."""
    std_ms: float
    """Sample standard deviation, ms (0 with one batch)."""
    mean_ms: float
    """Mean batch latency, ms."""
    batches: int
    """Batches measured."""

    @classmethod
    def of(cls, latencies_ms: Sequence[float]) -> LatencyStats:
        """Statistics of ``latencies_ms`` (at least one value, each > 0)."""
        if not latencies_ms:
            raise ValueError("no latencies measured")
        if min(latencies_ms) <= 0 or not all(math.isfinite(v) for v in latencies_ms):
            raise ValueError("latencies must be finite and > 0")
        ordered = sorted(latencies_ms)
        rank = max(1, math.ceil(0.99 * len(ordered)))
        std = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
        return cls(
            median_ms=statistics.median(ordered),
            p99_ms=ordered[rank - 1],
            std_ms=std,
            mean_ms=statistics.fmean(ordered),
            batches=len(ordered),
        )

    def throughput_per_s(self, batch: int) -> float:
        """Requests per second of one closed-loop process: ``batch`` per mean latency."""
        return batch * 1000.0 / self.mean_ms

    def to_dict(self) -> dict[str, Any]:
        """Fields by name (JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LatencyStats:
        """Inverse of :meth:`to_dict`; KeyError/TypeError/ValueError on a bad document."""
        return cls(
            median_ms=float(doc["median_ms"]),
            p99_ms=float(doc["p99_ms"]),
            std_ms=float(doc["std_ms"]),
            mean_ms=float(doc["mean_ms"]),
            batches=int(doc["batches"]),
        )
