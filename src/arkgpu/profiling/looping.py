"""The measuring loop every backend's worker runs: warm up, then time batches.

Standard library only: the PyTorch worker process imports it before torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Window:
    """How one point's batches run: the fields of :class:`arkgpu.profiling.plans.Timing`
    a worker needs."""

    warmup_s: float
    """Batches run and thrown away first, s."""
    measure_s: float
    """Measuring window, s."""
    min_iterations: int
    """Fewest measured batches."""
    max_iterations: int
    """Most measured batches."""


def measure(step: Callable[[], None], window: Window) -> tuple[list[float], float]:
    """Run ``step`` (one batch, returning when it has completed) through ``window``.

    Returns the measured batch latencies in ms and the monotonic time the
    measuring window began (the same clock in every process of the machine).
    """
    end = time.monotonic() + window.warmup_s
    while time.monotonic() < end:
        step()
    start = time.monotonic()
    end = start + window.measure_s
    latencies: list[float] = []
    while len(latencies) < window.max_iterations and (
        time.monotonic() < end or len(latencies) < window.min_iterations
    ):
        t0 = time.perf_counter()
        step()
        latencies.append((time.perf_counter() - t0) * 1000.0)
    return latencies, start
