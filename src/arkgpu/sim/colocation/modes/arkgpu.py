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
shares from the measured rates and p99 latencies. The first split of a GPU
and every adjustment run through
:class:`arkgpu.colocation.deciding.NodeController`, the node runtime's control
loop: the mode applies its decision (shares in basis points, and the share
each LC service lends each BE job while idle) to the simulated pods. Policies
see the predictor only; the latencies they produce come from the ground truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from arkgpu.colocation.calibration import CalibrationConfig, model_factors
from arkgpu.colocation.deciding import ControlConfig, GpuDecision, NodeController
from arkgpu.colocation.observations import GpuObservations, peak_demand, peak_observation
from arkgpu.colocation.sizing import CorrectedPredictor, LcDemand, ShareSizer
from arkgpu.model.shares import share_fraction
from arkgpu.placement.lc_placing import GpuSnapshot, choose_gpu_for_be, choose_gpu_for_lc
from arkgpu.sim.colocation.modes.base import (
    ModeContext,
    SharingMode,
    be_corunners,
    busy_corunners,
    register_mode,
)
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod


@register_mode("arkgpu")
class ArkGpuMode(SharingMode):
    """ArkGPU's two-level scheduler and adjustment unit."""

    def __init__(self, ctx: ModeContext) -> None:
        super().__init__(ctx)
        calibration = CalibrationConfig() if ctx.options.calibrate else None
        config = ControlConfig(lend_idle_share=self.lends_idle_share, calibration=calibration)
        self.controller = NodeController(ctx.sizer, config)
        self.decisions: dict[int, GpuDecision] = {}
        self._placing: tuple[tuple[tuple[str, float], ...], ShareSizer] = ((), ctx.sizer)

    def _snapshot(self, gpu: GpuRuntime) -> GpuSnapshot[LcDemand]:
        return GpuSnapshot(
            gpu.index,
            gpu.memory_mib - gpu.used_memory_mib(),
            tuple(peak_demand(lc.spec) for lc in gpu.lcs),
            len(gpu.running_bes()),
        )

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """Level-1 placement over the predictor (with calibration: its corrected figures)."""
        snaps = [self._snapshot(g) for g in gpus]
        sizer = self._placing_sizer(gpus)
        if isinstance(pod, LcRuntime):
            reserve = self.ctx.options.be_reserve
            return choose_gpu_for_lc(peak_demand(pod.spec), pod.mem_mib, snaps, sizer, reserve)
        return choose_gpu_for_be(pod.mem_mib, snaps, sizer)

    def _placing_sizer(self, gpus: Sequence[GpuRuntime]) -> ShareSizer:
        """The sizer placement asks: per model, the largest correction learnt of its
        services (none learnt: the sizer as given); rebuilt when the factors change."""
        models = {lc.name: lc.spec.model for g in gpus for lc in g.lcs}
        found = model_factors(self.controller.corrections(), models)
        key = tuple(sorted((m, round(f, 2)) for m, f in found.items() if round(f, 2) != 1.0))
        if key != self._placing[0]:
            base = self.ctx.sizer
            sizer = ShareSizer(CorrectedPredictor(base.predictor, key), base.gpu, base.config)
            self._placing = (key, sizer if key else base)
        return self._placing[1]

    def reshare(self, gpu: GpuRuntime) -> None:
        """Start from the split at each LC service's peak until the unit has measurements."""
        lcs = tuple(peak_observation(lc.name, lc.spec, lc.mem_mib) for lc in gpu.lcs)
        self._apply(gpu, GpuObservations(gpu.index, lcs, gpu.be_observations()))

    def on_tick(self, gpu: GpuRuntime, observations: GpuObservations) -> None:
        """Run the node's control loop on the period's measurements."""
        self._apply(gpu, observations)

    def _apply(self, gpu: GpuRuntime, observations: GpuObservations) -> None:
        """Give each pod the share the control loop decided (basis points to a fraction)."""
        decision = self.decisions[gpu.index] = self.controller.tick(observations)
        for lc in gpu.lcs:
            entry = decision.entry(lc.name)
            if entry is not None:
                lc.share = share_fraction(entry.share_bp)
        for be in gpu.running_bes():
            entry = decision.entry(be.name)
            be.share = 0.0 if entry is None else share_fraction(entry.share_bp)

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Measured latency at the LC share with the executing co-runners' interference."""
        truth = self.ctx.truth
        slow = truth.slowdown(lc.spec.model, batch, lc.share, busy_corunners(lc, gpu))
        return truth.latency_ms(lc.spec.model, batch, lc.share) * slow

    lends_idle_share: ClassVar[bool] = True
    """BE jobs use the share of LC services while those are idle (see the module docstring)."""

    def be_share(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """BE share over the period: its own plus what its lenders lent it while idle."""
        decision = self.decisions.get(gpu.index)
        entry = None if decision is None else decision.entry(be.name)
        if entry is None or not entry.lenders:
            return be.share
        lcs = {lc.name: lc for lc in gpu.lcs}
        idle = sum(
            (1.0 - busy.get(lcs[k], 0.0)) * share_fraction(bp)
            for k, bp in zip(entry.lenders, entry.lent_bp, strict=True)
        )
        return min(1.0, be.share + idle)

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
