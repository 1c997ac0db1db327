"""Level-1 placement by the predictor: which GPU an LC service or a BE job goes to.

A GPU takes a new LC service only if every LC service on it, the new one
included, is predicted to meet its target (with the sizing headroom) at its
expected peak rate, with the predicted slowdown of its co-runners, and the
shares so sized add up to at most ``1 - be_reserve``. Among the GPUs that
pass, the one left with the most spare share wins (spreading peaks leaves room
for BE work everywhere); a later GPU wins only by more than
:data:`SCORE_EPSILON`, so ties go to the lower index. A BE job goes to the GPU
whose LC services leave the most share per BE job. Memory must fit in both
cases.

As :class:`~arkgpu.placement.ranking.Ranking` does for nodes, every GPU gets a
:class:`GpuVerdict`: fits (with a score and the new pod's share in basis
points) or a reason a person can read. Pure code over snapshots: the share
sizing (level 2, :mod:`arkgpu.colocation.sizing`) comes in as any object with
the :class:`ShareSizing` methods, so this layer does not import colocation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from arkgpu.model.shares import share_bp
from arkgpu.predictor import Workload

SCORE_EPSILON = 1e-9
"""Spare share by which a later GPU must beat an earlier one (float noise is a tie)."""


class LcService(Protocol):
    """What the check reads of an LC service's demand itself: its model."""

    @property
    def model(self) -> str:
        """DNN model name."""
        ...


DemandT = TypeVar("DemandT", bound=LcService)
DemandT_contra = TypeVar("DemandT_contra", bound=LcService, contravariant=True)


class ShareSizing(Protocol[DemandT_contra]):
    """Level-2 sizing over the fitted predictor (:class:`arkgpu.colocation.sizing.ShareSizer`)."""

    def plan(self, demand: DemandT_contra, slowdown: float = ...) -> tuple[float, int] | None:
        """(smallest sufficient share, batch it runs) at ``slowdown``, or None."""
        ...

    def slowdown(self, target: Workload, corunners: Sequence[Workload]) -> float:
        """Predicted level-2 slowdown (>= 1) of ``target`` next to ``corunners``."""
        ...


# --- Headroom for unsure predictions (issue 27) -------------------------------------------
# A sizer that can say how unsure the predictor is about a workload (the
# predictor's calibrated interval, arkgpu.predictor.confidence) makes the LC
# check plan that workload as if it ran that much slower. With co-runners, a
# sizer that knows level 2's interval (arkgpu.predictor.guarding, issue 35)
# answers for the co-location: a pair never measured together is planned at the
# upper end of its interval instead of being refused or packed blindly. Sizers
# without it, confident predictions (factor 1) and the BE check are unchanged.


@runtime_checkable
class DoubtfulSizing(Protocol):
    """A sizer that knows how unsure its latency prediction for a workload is."""

    def doubt(self, target: Workload) -> float:
        """Factor >= 1 the latency may plausibly exceed the prediction by; 1 when confident."""
        ...


@runtime_checkable
class PairDoubtfulSizing(Protocol):
    """A sizer that also knows how unsure its level-2 prediction for a co-location is."""

    def pair_doubt(self, target: Workload, corunners: Sequence[Workload]) -> float:
        """Factor >= 1 the co-located latency may plausibly exceed the prediction by (the
        level-2 interval, issue 35); the level-1 doubt when the pair was measured."""
        ...


def doubt_factor(sizer: object, target: Workload, corunners: Sequence[Workload] = ()) -> float:
    """``sizer.pair_doubt(target, corunners)`` when there are co-runners and the sizer offers
    it, else ``sizer.doubt(target)`` if offered, else 1 (at least 1)."""
    if corunners and isinstance(sizer, PairDoubtfulSizing):
        return max(1.0, sizer.pair_doubt(target, corunners))
    return max(1.0, sizer.doubt(target)) if isinstance(sizer, DoubtfulSizing) else 1.0


# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSnapshot(Generic[DemandT]):
    """What placement knows about one GPU."""

    index: int
    """GPU index."""
    free_memory_mib: int
    """Memory not yet promised to pods."""
    lcs: tuple[DemandT, ...] = ()
    """LC services on it, at their peak rates."""
    be_jobs: int = 0
    """BE jobs on it."""


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """One GPU's answer for one pod."""

    index: int
    """GPU index."""
    fits: bool
    """The GPU can take the pod."""
    reason: str
    """Why it cannot, for a person; "" when it fits."""
    score: float = 0.0
    """Spare share left (LC) or spare share per BE job (BE); higher is better."""
    share_bp: int = 0
    """The new pod's compute share at its peak (LC) or its spare share (BE), basis points."""


def peak_shares(
    lcs: Sequence[DemandT], sizer: ShareSizing[DemandT], rounds: int = 3, doubt: bool = False
) -> list[float] | None:
    """Shares that meet every LC's target at its rate with predicted interference, or None.

    With ``doubt``, each LC's plan also keeps the headroom :func:`doubt_factor` asks for.
    """
    plans = [sizer.plan(d) for d in lcs]
    doubts = [1.0 for _ in lcs]
    for _ in range(rounds):
        if any(p is None for p in plans):
            return None
        work = [Workload(d.model, p[1], p[0]) for d, p in zip(lcs, plans, strict=True) if p]
        if doubt:
            doubts = [
                max(old, doubt_factor(sizer, work[i], work[:i] + work[i + 1 :]))
                for i, old in enumerate(doubts)
            ]
        plans = [
            sizer.plan(d, sizer.slowdown(work[i], work[:i] + work[i + 1 :]) * doubts[i])
            for i, d in enumerate(lcs)
        ]
    if any(p is None for p in plans):
        return None
    return [p[0] for p in plans if p]


def _judge_each(
    gpus: Sequence[GpuSnapshot[DemandT]],
    mem_mib: int,
    judge: Callable[[GpuSnapshot[DemandT]], GpuVerdict],
) -> list[GpuVerdict]:
    """``judge`` every GPU with ``mem_mib`` free; the others lack memory."""
    return [
        judge(gpu)
        if gpu.free_memory_mib >= mem_mib
        else GpuVerdict(
            gpu.index,
            False,
            f"GPU {gpu.index} has {gpu.free_memory_mib} MiB free, the pod asks for {mem_mib}",
        )
        for gpu in gpus
    ]


def lc_verdicts(
    demand: DemandT,
    mem_mib: int,
    gpus: Sequence[GpuSnapshot[DemandT]],
    sizer: ShareSizing[DemandT],
    be_reserve: float = 0.0,
) -> list[GpuVerdict]:
    """Per GPU: can it take a new LC service at its peak ``demand``, and how much is left."""

    def judge(gpu: GpuSnapshot[DemandT]) -> GpuVerdict:
        shares = peak_shares((*gpu.lcs, demand), sizer, doubt=True)
        if shares is None:
            why = "no share meets every LC service's target at its peak with the co-runners"
            return GpuVerdict(gpu.index, False, f"GPU {gpu.index}: {why}")
        if sum(shares) > 1.0 - be_reserve + SCORE_EPSILON:
            why = f"LC shares at peak add up to {sum(shares):.2f} > {1.0 - be_reserve:.2f}"
            return GpuVerdict(gpu.index, False, f"GPU {gpu.index}: {why}")
        return GpuVerdict(gpu.index, True, "", 1.0 - sum(shares), share_bp(shares[-1]))

    return _judge_each(gpus, mem_mib, judge)


def be_verdicts(
    mem_mib: int, gpus: Sequence[GpuSnapshot[DemandT]], sizer: ShareSizing[DemandT]
) -> list[GpuVerdict]:
    """Per GPU: can it take a new BE job, and what share per BE job its LC services leave."""

    def judge(gpu: GpuSnapshot[DemandT]) -> GpuVerdict:
        shares = peak_shares(gpu.lcs, sizer) if gpu.lcs else []
        spare = 1.0 - sum(shares) if shares is not None else 0.0
        per_job = spare / (gpu.be_jobs + 1)
        return GpuVerdict(gpu.index, True, "", per_job, share_bp(max(per_job, 0.0)))

    return _judge_each(gpus, mem_mib, judge)


def best_gpu(verdicts: Sequence[GpuVerdict]) -> int | None:
    """Index of the GPU that fits with the highest score (see :data:`SCORE_EPSILON`)."""
    best: GpuVerdict | None = None
    for v in verdicts:
        if v.fits and (best is None or v.score > best.score + SCORE_EPSILON):
            best = v
    return None if best is None else best.index


def choose_gpu_for_lc(
    demand: DemandT,
    mem_mib: int,
    gpus: Sequence[GpuSnapshot[DemandT]],
    sizer: ShareSizing[DemandT],
    be_reserve: float = 0.0,
) -> int | None:
    """Index of the GPU for a new LC service at its peak ``demand``, or None if none fits."""
    return best_gpu(lc_verdicts(demand, mem_mib, gpus, sizer, be_reserve))


def choose_gpu_for_be(
    mem_mib: int, gpus: Sequence[GpuSnapshot[DemandT]], sizer: ShareSizing[DemandT]
) -> int | None:
    """Index of the GPU for a new BE job, or None when no GPU has the memory."""
    return best_gpu(be_verdicts(mem_mib, gpus, sizer))
