"""A container's region read into what the control loop observes each period.

For an LC container the runtime reads the latency samples reported since the
last period (:func:`arkgpu.limiter.latencies.read_latencies`; each sample is one
request, or a batch of ``batch`` requests sharing a latency) and turns them into
an :class:`~arkgpu.colocation.observations.LcObservation` through
:func:`~arkgpu.colocation.observations.observe_lc`, as the simulator does. A
batch in flight for longer than the target, with nothing completed, counts as
a full queue: the adjustment unit raises the share instead of letting the
boost drain on a period without samples.

Online calibration's evidence (:mod:`arkgpu.colocation.calibration`) is the
samples reported for a batch of two or more requests: one latency for the
whole batch, which is what ``LatencyReporter.batch(size)`` measures (the
batch's execution). Per-request samples mix in the time queued, so they are
not evidence; a server that reports only those is not calibrated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arkgpu.colocation.deciding import ContainerDecision
from arkgpu.colocation.observations import BeObservation, LcObservation, observe_lc
from arkgpu.limiter.region import USAGE_FILE, Limits, Usage
from arkgpu.node.pods import PodSpec
from arkgpu.node.reading import UsageReader


@dataclass
class Container:
    """One adopted container: its spec, region and what was last read and written."""

    spec: PodSpec
    """What ``pod.json`` says."""
    region: Path
    """Its region folder."""
    limits: Limits
    """The limits its region holds now (read at adoption, then as written)."""
    seq: int = 0
    """Sequence number of the last latency sample read."""
    lenders: tuple[str, ...] = ()
    """Lenders linked at ``lenders/<k>`` (BE)."""
    usage: Usage | None = field(default=None, repr=False)
    """The usage read this period."""
    p99_ms: float = float("nan")
    """LC: p99 of the last period with completions, ms (NaN before any)."""
    requests: int = 0
    """LC: requests completed since adoption."""
    within_target: int = 0
    """LC: requests completed since adoption within the p99 target (SLO attainment)."""
    quiet: LcObservation | BeObservation | None = field(default=None, repr=False)
    """The observation of a period with nothing completed, kept: equal each such
    period (a BE job's always; an LC service's while its queue state holds)."""
    decided: ContainerDecision | None = None
    """The last decision written into its limits (an equal one writes nothing)."""
    reader: UsageReader = field(init=False, repr=False, compare=False)
    """Reads its usage file each period (:mod:`arkgpu.node.reading`)."""

    def __post_init__(self) -> None:
        """Open the reader of the region's usage file."""
        self.reader = UsageReader(self.region / USAGE_FILE)

    @property
    def name(self) -> str:
        """Container name."""
        return self.spec.name

    def active(self) -> bool:
        """Whether it counts this period: a live process of it is attached.

        A container none of whose processes has started, or whose processes all died,
        holds no slot: the runtime writes nothing for it, and its share goes to the
        others until a process of it runs. A process is alive when /proc shows its pid
        with its start time (the runtime shares the container's pid namespace) or, in any
        namespace, when the library's liveness lock on the usage file is held (the pids a
        container writes mean nothing from the pid namespace of the chart's node pod).
        """
        u = self.usage
        if u is None or not u.processes:
            return False
        if any(p.alive for p in u.processes):
            return True
        try:
            return self.reader.in_use()
        except OSError:
            return False


def refresh(container: Container) -> None:
    """Read the container's usage for this period (None when the file is unreadable)."""
    try:
        container.usage = container.reader.read()
    except (OSError, ValueError):
        container.usage = None


def skip_old_samples(container: Container) -> None:
    """Start reading latencies after what the region holds now (adoption, restart)."""
    refresh(container)
    container.seq = container.usage.latency_head if container.usage else 0


def observe(container: Container, period_s: float) -> LcObservation | BeObservation:
    """This period's observation of the container."""
    spec = container.spec
    if not spec.is_lc:
        if container.quiet is None:
            container.quiet = BeObservation(spec.name, spec.model, spec.batch, spec.memory_mib)
        return container.quiet
    head = container.usage.latency_head if container.usage else container.seq
    try:
        samples = container.reader.entries(head, container.seq) if head != container.seq else []
    except (OSError, ValueError):
        samples = []
    if not samples:
        return _quiet(container, period_s)
    container.seq = samples[-1][0]
    counts = [max(batch, 1) for _, _, _, batch in samples]
    arrived = sum(counts)
    latencies_ns = [latency for _, _, latency, _ in samples]
    latencies = [np.array(latencies_ns, dtype=np.float64) / 1e9]
    container.requests += arrived
    bound_ns = spec.target_ms * 1e6
    container.within_target += sum(
        n for n, latency in zip(counts, latencies_ns, strict=True) if latency <= bound_ns
    )
    observation = observe_lc(
        spec.name,
        spec,
        arrived=arrived,
        period_s=period_s,
        latencies_s=latencies,
        queued=0,
        memory_mib=spec.memory_mib,
        batches=[(b, ns / 1e9) for _, _, ns, b in samples if b >= 2],
    )
    container.p99_ms = observation.p99_ms
    return observation


def _quiet(container: Container, period_s: float) -> LcObservation:
    """An LC period with nothing completed: rate 0, p99 unknown, the queue as it stands
    (the same observation as long as the queue state holds)."""
    queued = _queued(container, False)
    kept = container.quiet
    if isinstance(kept, LcObservation) and kept.queued == queued:
        return kept
    spec = container.spec
    fresh = observe_lc(
        spec.name,
        spec,
        arrived=0,
        period_s=period_s,
        latencies_s=[],
        queued=queued,
        memory_mib=spec.memory_mib,
    )
    container.quiet = fresh
    return fresh


def _queued(container: Container, completed: bool) -> int:
    u = container.usage
    if completed or u is None or u.batches_in_flight == 0 or u.in_flight_since_ns == 0:
        return 0
    waited_ms = (time.monotonic_ns() - u.in_flight_since_ns) / 1e6
    return container.spec.max_batch + 1 if waited_ms > container.spec.target_ms else 0
