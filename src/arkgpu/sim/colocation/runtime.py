"""Run-time state of pods and GPUs in the co-location simulator (bookkeeping only)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from arkgpu.colocation.observations import BeObservation
from arkgpu.sim.colocation.scenarios import BeSpec, LcSpec
from arkgpu.sim.engine import EventHandle


class PodState(enum.Enum):
    """Life cycle of a pod."""

    PENDING = "pending"
    """Waiting for a GPU."""
    RUNNING = "running"
    """On a GPU."""
    FAILED = "failed"
    """Killed (out of memory) and not restarted."""
    FINISHED = "finished"
    """A BE job that completed its iterations."""


class _OfSpec:
    """Name and memory of a pod, read from its spec."""

    spec: LcSpec | BeSpec

    @property
    def name(self) -> str:
        """Pod (service or job) name."""
        return self.spec.name

    @property
    def mem_mib(self) -> int:
        """GPU memory it needs."""
        return self.spec.mem_mib


@dataclass(eq=False)
class LcRuntime(_OfSpec):
    """One LC service: its arrivals, its batcher's position and its counters."""

    spec: LcSpec
    """The service."""
    arrivals: NDArray[np.float64]
    """Sorted arrival times (s) of every request in the horizon."""
    rng: np.random.Generator
    """Stream for the latency noise of its batches."""
    state: PodState = PodState.PENDING
    """Life cycle."""
    gpu: int | None = None
    """GPU index while placed."""
    share: float = 1.0
    """Compute share (spatial modes) or compute limit (hami), in (0, 1]."""
    head: int = 0
    """Index of the first request not yet taken into a batch."""
    busy: bool = False
    """A batch is executing."""
    batch: int = 0
    """Size of the executing (or last) batch."""
    batch_lo: int = 0
    """First request index of the executing batch."""
    batch_start: float = 0.0
    """Start time (s) of the executing batch."""
    completion: EventHandle | None = None
    """Pending completion event of the executing batch."""
    wake: EventHandle | None = None
    """Pending wake-up of the batcher."""
    down_until: float = 0.0
    """The pod restarts at this time after a fault (s)."""
    completed: int = 0
    """Requests completed."""
    good: int = 0
    """Requests completed within the target."""
    lost: int = 0
    """Requests lost in faults."""
    busy_s: float = 0.0
    """Busy time (s) accumulated in the current control period."""
    busy_total_s: float = 0.0
    """Busy time (s) over the whole run."""
    window: list[NDArray[np.float64]] = field(default_factory=list)
    """Latencies (s) of requests completed in the current control period."""
    window_done: int = 0
    """Requests completed in the current control period."""
    executed: list[tuple[int, float]] = field(default_factory=list)
    """(size, execution time in s) of the batches completed in the current control period."""
    tokens_s: float = 0.0
    """Token bucket of hami (GPU-seconds of work it may run unthrottled)."""
    tokens_at: float = 0.0
    """Time (s) the bucket was last refilled."""

    def queued(self, now: float) -> int:
        """Requests that have arrived and wait for a batch."""
        return int(np.searchsorted(self.arrivals, now, side="right")) - self.head


@dataclass(eq=False)
class BeRuntime(_OfSpec):
    """One BE training job: progress as a fluid of iterations."""

    spec: BeSpec
    """The job."""
    rng: np.random.Generator
    """Stream for the noise of its iteration rate."""
    state: PodState = PodState.PENDING
    """Life cycle."""
    gpu: int | None = None
    """GPU index while placed."""
    share: float = 1.0
    """Compute share (spatial modes) or compute limit (hami, tgs rate)."""
    iterations: float = 0.0
    """Iterations done."""
    rate: float = 0.0
    """Iterations per second in the last control period."""
    finished_at: float | None = None
    """Time (s) the job finished."""
    down_until: float = 0.0
    """The job restarts at this time after a fault (s)."""

    @property
    def active(self) -> bool:
        """Running on a GPU (so it occupies compute)."""
        return self.state is PodState.RUNNING


Pod = LcRuntime | BeRuntime


@dataclass(eq=False)
class GpuRuntime:
    """One GPU and the pods on it."""

    index: int
    """GPU index."""
    memory_mib: int
    """Device memory."""
    lcs: list[LcRuntime] = field(default_factory=list)
    """LC services placed here."""
    bes: list[BeRuntime] = field(default_factory=list)
    """BE jobs placed here (running or not)."""
    control: dict[str, float] = field(default_factory=dict)
    """Per-mode controller state (e.g. tgs's BE rate)."""

    def pods(self) -> list[Pod]:
        """Every pod on the GPU that still holds it."""
        lcs: list[Pod] = [p for p in self.lcs if p.state is PodState.RUNNING]
        return lcs + [b for b in self.bes if b.active]

    def used_memory_mib(self) -> int:
        """Memory held by running pods."""
        return sum(p.mem_mib for p in self.pods())

    def running_bes(self) -> list[BeRuntime]:
        """BE jobs running here."""
        return [b for b in self.bes if b.active]

    def be_observations(self) -> tuple[BeObservation, ...]:
        """The running BE jobs as the control loop sees them."""
        return tuple(
            BeObservation(b.name, b.spec.model, b.spec.batch, b.mem_mib) for b in self.running_bes()
        )
