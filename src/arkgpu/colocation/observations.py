"""What the node control loop sees of one GPU each period: LC measurements and BE jobs.

The simulator builds these from its own state every control period; the node
runtime builds them from the control regions and the LC services' metrics.
Both then hand them to :class:`arkgpu.colocation.deciding.NodeController`.
A measured period turns into an observation through :func:`observe_lc`, so
the request rate and the p99 are computed the same way in both places.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from arkgpu.colocation.sizing import LcDemand


class LcService(Protocol):
    """What the control loop needs to know about an LC service that does not change.

    A scenario's ``LcSpec`` has these fields; so will a pod's annotations.
    """

    @property
    def model(self) -> str:
        """DNN model served."""
        ...

    @property
    def target_ms(self) -> float:
        """p99 latency target (ms)."""
        ...

    @property
    def peak_rps(self) -> float:
        """Request rate (requests/s) expected at the peak of its load."""
        ...

    @property
    def max_batch(self) -> int:
        """Largest batch its batcher forms."""
        ...

    @property
    def max_queue_delay_ms(self) -> float:
        """Its batcher's queue delay (ms)."""
        ...


def demand_at(service: LcService, rate_rps: float) -> LcDemand:
    """``service``'s demand at request rate ``rate_rps`` (requests/s)."""
    s = service
    return LcDemand(s.model, s.target_ms, rate_rps, s.max_batch, s.max_queue_delay_ms)


def peak_demand(service: LcService) -> LcDemand:
    """``service``'s demand at its peak rate (what placement and a fresh split size for)."""
    return demand_at(service, service.peak_rps)


@dataclass(frozen=True)
class LcObservation:
    """One LC service's measurements over the last period."""

    name: str
    """Service name."""
    demand: LcDemand
    """Model, target and batching; ``rate_rps`` is the measured request rate."""
    p99_ms: float
    """Measured p99 latency (ms) over the period; NaN when nothing completed."""
    queued: int = 0
    """Requests waiting now."""
    memory_mib: int | None = None
    """GPU memory the pod asked for (MiB), its cap; None: no cap."""
    exec_ms: float = math.nan
    """Median execution time of the batches completed in the period (ms), the
    evidence of online calibration; NaN when not measured."""
    exec_batch: int = 0
    """Median size of those batches; 0 when not known (the batch the control
    loop planned stands in)."""
    batches: int = 0
    """Batches completed in the period (0: not measured)."""


@dataclass(frozen=True)
class BeObservation:
    """A BE job on the GPU: what it trains, as a co-runner of the LC services."""

    name: str
    """Job name."""
    model: str
    """DNN model trained."""
    batch: int
    """Training batch."""
    memory_mib: int | None = None
    """GPU memory the pod asked for (MiB), its cap; None: no cap."""


@dataclass(frozen=True)
class GpuObservations:
    """Everything the control loop sees of one GPU in one period."""

    gpu: int
    """GPU index on the node."""
    lcs: tuple[LcObservation, ...] = ()
    """The running LC services, in a fixed order (the order of the decision)."""
    bes: tuple[BeObservation, ...] = ()
    """The running BE jobs, in a fixed order."""
    period_s: float = 1.0
    """Length of the period observed (s): the clock of online calibration."""
    reserved_bp: int = 0
    """Share of the GPU held by containers the loop does not adjust (pods without an
    ArkGPU class keep the share they asked for, as in HAMi), basis points."""


def observe_lc(
    name: str,
    service: LcService,
    *,
    arrived: int,
    period_s: float,
    latencies_s: Sequence[NDArray[Any]],
    queued: int,
    memory_mib: int | None = None,
    batches: Sequence[tuple[int, float]] = (),
) -> LcObservation:
    """One period's measurements of an LC service as an observation.

    ``arrived`` requests came in over ``period_s`` seconds; ``latencies_s``
    holds the latencies (s) of the requests completed in the period, in
    chunks; ``queued`` requests wait now; ``batches`` the (size, execution
    time in s) of each batch completed, where measured.
    """
    rate = arrived / period_s
    demand, p99 = demand_at(service, rate), p99_ms(latencies_s)
    if not batches:
        return LcObservation(name, demand, p99, queued, memory_mib)
    sizes = sorted(b for b, _ in batches)
    exec_ms = float(np.median([t for _, t in batches])) * 1000.0
    median_size = sizes[(len(sizes) - 1) // 2]
    return LcObservation(name, demand, p99, queued, memory_mib, exec_ms, median_size, len(batches))


def p99_ms(latencies_s: Sequence[NDArray[Any]]) -> float:
    """p99 (ms) of request latencies given in seconds, in chunks; NaN when there are none."""
    if not latencies_s:
        return math.nan
    return _p99(np.concatenate(latencies_s)) * 1000.0


def _p99(values: NDArray[Any]) -> float:
    """``np.percentile(values, 99)`` (linear), bit for bit, without its overhead.

    For float64 without NaN: the sorted values at ``floor(v)`` and ``floor(v) + 1``
    with ``v = (n - 1) * 0.99``, interpolated as numpy's ``_lerp`` does (from
    the upper end when the weight is 0.5 or more). Other inputs (float32 from
    the simulator, NaN) go to numpy itself. A test compares both.
    """
    if values.dtype != np.float64 or values.ndim != 1 or values.size == 0:
        return float(np.percentile(values, 99))
    ordered = np.sort(values)
    if math.isnan(ordered[-1]):
        return float(np.percentile(values, 99))
    n = values.size
    virtual = (n - 1) * (99 / 100)
    if virtual >= n - 1:
        return float(ordered[-1])
    below = math.floor(virtual)
    gamma = virtual - below
    a, b = float(ordered[below]), float(ordered[below + 1])
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


def peak_observation(name: str, service: LcService, memory_mib: int | None = None) -> LcObservation:
    """What to decide from before a service has been measured: its peak, no latency yet."""
    return LcObservation(name, peak_demand(service), math.nan, 0, memory_mib)
