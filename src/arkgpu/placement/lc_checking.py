"""The predictor-driven check on the scheduler's path, for pods that carry LC attributes.

A pod with :attr:`~arkgpu.model.resources.Pod.lc` goes to a node only if, on
each GPU the policy gives it there, every LC service (the new one included)
is still predicted to meet its target at its peak rate with its co-runners
(:func:`arkgpu.placement.lc_placing.lc_verdicts`). The check keeps which pods
run on which GPU (:meth:`LcCheck.bound`, :meth:`LcCheck.released`); pods
without LC attributes count as BE jobs there. The level-2 sizer and the
conversion of :class:`~arkgpu.model.resources.LcAttributes` to its demand type
come in from the caller (the extender wires
:class:`arkgpu.colocation.sizing.ShareSizer`), so placement imports no
colocation code.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic

from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import LcAttributes, Pod
from arkgpu.placement.lc_placing import DemandT, GpuSnapshot, GpuVerdict, ShareSizing, lc_verdicts

Slot = tuple[int, int]
"""(node index, GPU slot)."""


@dataclass
class LcCheck(Generic[DemandT]):
    """The LC services and BE pods on every GPU, and the check of a new LC pod against them."""

    sizer: ShareSizing[DemandT]
    """Level-2 sizing over the fitted predictor."""
    demand_of: Callable[[LcAttributes], DemandT]
    """The sizer's demand for an LC service at its peak rate."""
    be_reserve: float = 0.0
    """Share of each GPU kept for BE work when placing LC services (0..1); 0 keeps none."""
    _on: dict[Slot, list[Pod]] = field(default_factory=lambda: defaultdict(list), repr=False)

    def judge(self, state: ClusterState, pod: Pod, where: Assignment) -> GpuVerdict:
        """The verdict of the first GPU of ``where`` that fails, or of the one needing the most
        share; a pod without LC attributes always fits (share 0)."""
        if pod.lc is None or not where.gpus:
            return GpuVerdict(-1, True, "")
        demand = self.demand_of(pod.lc)
        verdicts = [
            lc_verdicts(
                demand,
                pod.gpu_memory_mib,
                [self._snapshot(state, (where.node, g))],
                self.sizer,
                self.be_reserve,
            )[0]
            for g in where.gpus
        ]
        failed = [v for v in verdicts if not v.fits]
        if failed:
            name = state.nodes[where.node].name
            return GpuVerdict(failed[0].index, False, f"node {name}: {failed[0].reason}")
        return max(verdicts, key=lambda v: v.share_bp)

    def bound(self, pod: Pod, where: Assignment) -> None:
        """``pod`` now runs on the GPUs of ``where``."""
        for g in where.gpus:
            self._on[(where.node, g)].append(pod)

    def released(self, pod: Pod, where: Assignment) -> None:
        """``pod`` left the GPUs of ``where``."""
        for g in where.gpus:
            self._on[(where.node, g)].remove(pod)

    def _snapshot(self, state: ClusterState, slot: Slot) -> GpuSnapshot[DemandT]:
        pods = self._on.get(slot, [])
        lcs = tuple(self.demand_of(p.lc) for p in pods if p.lc is not None)
        memory = int(state.gpu_memory_left[slot])
        return GpuSnapshot(slot[1], memory, lcs, sum(p.lc is None for p in pods))
