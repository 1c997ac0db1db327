"""``arkgpu``: level-1 placement, level-2 split and the adjustment unit, over the fitted predictor.

Placement (:mod:`arkgpu.placement.lc_placing`): an LC service goes to a GPU
only if every LC service there is predicted to meet its target at its peak;
BE jobs go where LC services leave the most share. If no GPU passes, the pod
waits. Sharing is spatial: each pod has a compute share enforced like an MPS
active-thread percentage (ArkGPU's limiter changes it at run time). A batch's
latency is the measured latency at the pod's share times the measured
interference of the co-runners executing at its start; a BE job's rate uses
its share and the LC services' busy fractions. Every control period the
adjustment unit (:mod:`arkgpu.colocation.adjusting`) of each GPU sets new
shares from the measured rates and p99 latencies. Policies see the predictor
only; the latencies they produce come from the ground truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.colocation.adjusting import AdjustmentUnit, BeWorkload, LcObservation
from arkgpu.colocation.sizing import LcDemand
from arkgpu.placement.lc_placing import GpuSnapshot, choose_gpu_for_be, choose_gpu_for_lc
from arkgpu.sim.colocation.modes.base import (
    ModeContext,
    SharingMode,
    be_corunners,
    busy_corunners,
    register_mode,
)
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod, PodState
from arkgpu.sim.colocation.scenarios import LcSpec


def peak_demand(spec: LcSpec) -> LcDemand:
    """An LC service's demand at its peak rate."""
    return LcDemand(
        spec.model, spec.target_ms, spec.peak_rps, spec.max_batch, spec.max_queue_delay_ms
    )


def _workloads(gpu: GpuRuntime) -> list[BeWorkload]:
    return [BeWorkload(b.name, b.spec.model, b.spec.batch) for b in gpu.running_bes()]


@register_mode("arkgpu")
class ArkGpuMode(SharingMode):
    """ArkGPU's two-level scheduler and adjustment unit."""

    def __init__(self, ctx: ModeContext) -> None:
        super().__init__(ctx)
        self.units: dict[int, AdjustmentUnit] = {}

    def _snapshot(self, gpu: GpuRuntime) -> GpuSnapshot[LcDemand]:
        return GpuSnapshot(
            gpu.index,
            gpu.memory_mib - gpu.used_memory_mib(),
            tuple(peak_demand(lc.spec) for lc in gpu.lcs),
            len(gpu.running_bes()),
        )

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """Level-1 placement over the predictor."""
        snaps = [self._snapshot(g) for g in gpus]
        if isinstance(pod, LcRuntime):
            reserve = self.ctx.options.be_reserve
            return choose_gpu_for_lc(
                peak_demand(pod.spec), pod.mem_mib, snaps, self.ctx.sizer, reserve
            )
        return choose_gpu_for_be(pod.mem_mib, snaps, self.ctx.sizer)

    def _unit(self, gpu: GpuRuntime) -> AdjustmentUnit:
        if gpu.index not in self.units:
            self.units[gpu.index] = AdjustmentUnit(self.ctx.sizer)
        return self.units[gpu.index]

    def reshare(self, gpu: GpuRuntime) -> None:
        """Start from the split at each LC service's peak until the unit has measurements."""
        obs = [LcObservation(lc.name, peak_demand(lc.spec), float("nan")) for lc in gpu.lcs]
        self._apply(gpu, obs)

    def on_tick(self, gpu: GpuRuntime, observations: Sequence[LcObservation]) -> None:
        """Run the adjustment unit on the period's measurements."""
        self._apply(gpu, observations)

    def _apply(self, gpu: GpuRuntime, observations: Sequence[LcObservation]) -> None:
        split = self._unit(gpu).step(observations, _workloads(gpu))
        for lc in gpu.lcs:
            lc.share = max(split.lc.get(lc.name, lc.share), 0.01)
        for be in gpu.running_bes():
            be.share = split.be.get(be.name, 0.0)

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Measured latency at the LC share with the executing co-runners' interference."""
        truth = self.ctx.truth
        slow = truth.slowdown(lc.spec.model, batch, lc.share, busy_corunners(lc, gpu))
        return truth.latency_ms(lc.spec.model, batch, lc.share) * slow

    lends_idle_share = True
    """BE jobs use the share of LC services while those are idle (see the module docstring)."""

    def be_share(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """BE share over the period: its own plus, when lending, the LC shares left idle."""
        if not self.lends_idle_share:
            return be.share
        idle = sum(
            (1.0 - busy.get(lc, 0.0)) * lc.share for lc in gpu.lcs if lc.state is PodState.RUNNING
        )
        return min(1.0, be.share + idle / len(gpu.running_bes()))

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Measured iteration rate at the BE share with busy-weighted LC interference."""
        share = self.be_share(be, gpu, busy)
        if share <= 0.005:
            return 0.0
        truth, model, batch = self.ctx.truth, be.spec.model, be.spec.batch
        slow = truth.slowdown(model, batch, share, be_corunners(be, gpu, busy))
        return 1000.0 / (truth.training_iteration_ms(model, batch, share) * slow)


@register_mode("arkgpu-static")
class ArkGpuStaticMode(ArkGpuMode):
    """ArkGPU without idle-share lending: BE jobs are capped at their share at all times."""

    lends_idle_share = False
