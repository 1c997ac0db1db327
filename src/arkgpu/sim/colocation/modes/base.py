"""What a sharing mode decides, its registry, and helpers shared by the modes.

A mode decides three things, each from the simulator's state at that moment:
where a pod goes (or that it waits), how long an LC batch takes on its GPU
(from the ground truth: the mode's effective share, time slicing and the
measured interference of the co-runners executing at the batch's start), and
how many iterations per second a BE job makes over a control period (from the
LC services' busy fractions in that period). Adaptive modes also act once per
control period (:meth:`SharingMode.on_tick`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from arkgpu.colocation.observations import GpuObservations
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod
from arkgpu.sim.colocation.scenarios import Scenario
from arkgpu.sim.colocation.truth import GroundTruth


class ModeNotApplicableError(ValueError):
    """The mode cannot run this scenario (e.g. MIG on a V100)."""


@dataclass(frozen=True)
class ModeOptions:
    """Parameters of the modes' mechanisms (docs/COLOCATION.md)."""

    fault_rate_per_h: float = 0.0
    """MPS: faults per client per simulated hour; a fault fails every client of the GPU."""
    restart_s: float = 10.0
    """MPS: simulated seconds the clients of a faulted GPU need to come back."""
    timeslice_overhead: float = 0.0
    """timeslice/hami/tgs: extra time per context switch as a fraction of the work;
    0 (the baseline's best case) because no measured figure is shipped."""
    hami_bucket_s: float = 0.1
    """hami: token-bucket depth as seconds of refill (burst allowance of HAMi-core's
    utilisation limiter, which samples every few ms and averages)."""
    tgs_increase: float = 0.05
    """tgs: additive increase of the BE rate per control period."""
    tgs_decrease: float = 0.5
    """tgs: multiplicative decrease of the BE rate when LC throughput falls."""
    tgs_min_rate: float = 0.05
    """tgs: smallest BE rate (fraction of GPU time)."""
    tgs_max_rate: float = 0.95
    """tgs: largest BE rate."""
    mig_layout: tuple[int, ...] = (3, 2, 2)
    """mig: GPCs of each instance of every GPU (A100: 7 GPCs; 3g+2g+2g is a valid layout)."""
    be_reserve: float = 0.0
    """arkgpu: share kept free for BE work when placing LC services."""
    calibrate: bool = False
    """arkgpu: online calibration of the predictor per LC service
    (:mod:`arkgpu.colocation.calibration`); off by default (the shipped figures)."""


@dataclass
class ModeContext:
    """What a mode may read: the ground truth and, for policies, the fitted predictor."""

    scenario: Scenario
    """The scenario run."""
    truth: GroundTruth
    """Measured behaviour (the simulator's physics)."""
    sizer: ShareSizer
    """Share sizing over the fitted predictor (what policies see)."""
    gpu_memory_mib: int
    """Memory of each GPU."""
    options: ModeOptions
    """Mechanism parameters."""


class SharingMode(ABC):
    """A way of sharing GPUs between pods."""

    key: ClassVar[str]
    """Registry key (the ``--mode`` name)."""
    fault_domain: ClassVar[bool] = False
    """True when a client fault fails every client of the GPU (MPS)."""

    def __init__(self, ctx: ModeContext) -> None:
        self.ctx = ctx

    def check(self) -> None:  # noqa: B027 - optional hook, most modes suit every scenario
        """Raise :class:`ModeNotApplicableError` when the scenario does not suit the mode."""

    @abstractmethod
    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """GPU index for a pending pod, or None to keep it waiting."""

    def memory_isolated(self) -> bool:
        """True when over-committed memory is refused at placement (no pod fails)."""
        return True

    def reshare(self, gpu: GpuRuntime) -> None:  # noqa: B027 - optional hook (static shares)
        """Set static shares after the pods of ``gpu`` changed."""

    @abstractmethod
    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Mean latency (ms) of a batch of ``batch`` requests starting now, before noise."""

    @abstractmethod
    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Iterations/s of ``be`` over the last period, given the LC busy fractions."""

    def on_tick(  # noqa: B027 - optional hook (adaptive modes)
        self, gpu: GpuRuntime, observations: GpuObservations
    ) -> None:
        """Adapt once per control period (adaptive modes)."""


_REGISTRY: dict[str, type[SharingMode]] = {}


def register_mode(key: str) -> Callable[[type[SharingMode]], type[SharingMode]]:
    """Class decorator: register a mode under ``key``; a duplicate key raises."""

    def add(cls: type[SharingMode]) -> type[SharingMode]:
        if key in _REGISTRY:
            raise ValueError(f"sharing mode {key!r} registered twice")
        cls.key = key
        _REGISTRY[key] = cls
        return cls

    return add


def mode_class(key: str) -> type[SharingMode]:
    """The mode registered under ``key``."""
    try:
        return _REGISTRY[key]
    except KeyError:
        raise ValueError(f"unknown mode {key!r} (known: {', '.join(mode_keys())})") from None


def mode_keys() -> list[str]:
    """Registered mode keys, in registration order."""
    return list(_REGISTRY)


def spread(pod: Pod, gpus: Sequence[GpuRuntime], exclusive: bool = False) -> int | None:
    """The GPU with the fewest running pods (lowest index first); ``exclusive``: an empty one."""
    del pod
    counts = [(len(g.pods()), g.index) for g in gpus]
    n, index = min(counts)
    if exclusive and n > 0:
        return None
    return index


def busy_corunners(lc: LcRuntime, gpu: GpuRuntime) -> list[tuple[str, int, float]]:
    """Co-runners executing now: busy LC services and running BE jobs (weight 1 each)."""
    out = [(o.spec.model, o.batch, 1.0) for o in gpu.lcs if o.busy and o is not lc]
    out += [(b.spec.model, b.spec.batch, 1.0) for b in gpu.running_bes() if b.share > 0]
    return out


def be_corunners(
    be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]
) -> list[tuple[str, int, float]]:
    """Co-runners of a BE job over a period: LC services weighted by busy fraction, other BEs."""
    out = [(lc.spec.model, max(lc.batch, 1), busy.get(lc, 0.0)) for lc in gpu.lcs]
    out += [(b.spec.model, b.spec.batch, 1.0) for b in gpu.running_bes() if b is not be]
    return out


def waterfill(demands: Sequence[float], capacity: float = 1.0) -> list[float]:
    """Max-min fair split of ``capacity`` among ``demands`` (each gets at most its demand)."""
    out = [0.0] * len(demands)
    left, order = capacity, sorted(range(len(demands)), key=lambda i: demands[i])
    for k, i in enumerate(order):
        fair = left / (len(order) - k)
        out[i] = min(demands[i], fair)
        left -= out[i]
    return out
