"""Level-1 placement of ArkGPU: which GPU an LC service or a BE job goes to.

A GPU is chosen for an LC service only if every LC service on it, the new one
included, is predicted to meet its target (with the sizing headroom) at its
expected peak rate, with the predicted slowdown of its co-runners, and the
shares so sized add up to at most ``1 - be_reserve``. Among the GPUs that
pass, the one left with the most spare share wins (spreading peaks leaves room
for BE work everywhere); ties go to the lower index. A BE job goes to the GPU
whose LC services leave the most share per BE job. Memory must fit in both
cases. Pure code: the caller passes snapshots and gets an index or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.predictor import Workload


@dataclass(frozen=True)
class GpuSnapshot:
    """What placement knows about one GPU."""

    index: int
    """GPU index."""
    free_memory_mib: int
    """Memory not yet promised to pods."""
    lcs: tuple[LcDemand, ...] = ()
    """LC services on it, at their peak rates."""
    be_jobs: int = 0
    """BE jobs on it."""


def peak_shares(lcs: Sequence[LcDemand], sizer: ShareSizer, rounds: int = 3) -> list[float] | None:
    """Shares that meet every LC's target at its rate with predicted interference, or None."""
    plans = [sizer.plan(d) for d in lcs]
    for _ in range(rounds):
        if any(p is None for p in plans):
            return None
        work = [Workload(d.model, p[1], p[0]) for d, p in zip(lcs, plans, strict=True) if p]
        plans = [
            sizer.plan(d, sizer.slowdown(work[i], work[:i] + work[i + 1 :]))
            for i, d in enumerate(lcs)
        ]
    if any(p is None for p in plans):
        return None
    return [p[0] for p in plans if p]


def choose_gpu_for_lc(
    demand: LcDemand,
    mem_mib: int,
    gpus: Sequence[GpuSnapshot],
    sizer: ShareSizer,
    be_reserve: float = 0.0,
) -> int | None:
    """Index of the GPU for a new LC service at its peak ``demand``, or None if none fits."""
    best: tuple[float, int] | None = None
    for gpu in gpus:
        if gpu.free_memory_mib < mem_mib:
            continue
        shares = peak_shares((*gpu.lcs, demand), sizer)
        if shares is None or sum(shares) > 1.0 - be_reserve + 1e-9:
            continue
        spare = 1.0 - sum(shares)
        if best is None or spare > best[0] + 1e-9:
            best = (spare, gpu.index)
    return None if best is None else best[1]


def choose_gpu_for_be(mem_mib: int, gpus: Sequence[GpuSnapshot], sizer: ShareSizer) -> int | None:
    """Index of the GPU for a new BE job, or None when no GPU has the memory."""
    best: tuple[float, int] | None = None
    for gpu in gpus:
        if gpu.free_memory_mib < mem_mib:
            continue
        shares = peak_shares(gpu.lcs, sizer) if gpu.lcs else []
        spare = 1.0 - sum(shares) if shares is not None else 0.0
        per_job = spare / (gpu.be_jobs + 1)
        if best is None or per_job > best[0] + 1e-9:
            best = (per_job, gpu.index)
    return None if best is None else best[1]
