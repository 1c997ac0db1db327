"""``mig``: static MIG partitions (A100/H100 only), one pod per instance.

Every GPU is cut into the instances of ``ModeOptions.mig_layout`` (GPCs per
instance out of 7, default 3g+2g+2g). A pod takes a free instance (the GPU
with the most free instances, then the largest instance) or waits. An
instance is isolated in compute, memory and cache: a batch's latency is the
measured latency at share ``gpcs / 7`` with no interference. Memory per
instance is the GPU's memory times ``gpcs / 8`` (A100 memory slices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.sim.colocation.modes.base import ModeNotApplicableError, SharingMode, register_mode
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod

_GPCS = 7
"""GPCs of an A100/H100."""


@register_mode("mig")
class MigMode(SharingMode):
    """Static MIG instances."""

    def check(self) -> None:
        """MIG exists on A100 and H100 only."""
        gpu = self.ctx.scenario.gpu
        if not gpu.startswith(("A100", "H100", "H200")):
            raise ModeNotApplicableError(f"mig needs A100/H100 GPUs; scenario has {gpu}")

    def _free(self, gpu: GpuRuntime) -> list[int]:
        layout = list(self.ctx.options.mig_layout)
        for pod in gpu.pods():
            layout.remove(round(pod.share * _GPCS))
        return sorted(layout, reverse=True)

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """The GPU with the most free instances that has one with enough memory."""
        best: tuple[int, int] | None = None
        for g in gpus:
            free = [c for c in self._free(g) if g.memory_mib * c // 8 >= pod.mem_mib]
            if free and (best is None or len(self._free(g)) > best[0]):
                best = (len(self._free(g)), g.index)
        if best is None:
            return None
        gpu = gpus[best[1]]
        size = next(c for c in self._free(gpu) if gpu.memory_mib * c // 8 >= pod.mem_mib)
        pod.share = size / _GPCS
        return best[1]

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Solo latency at the instance's share."""
        del gpu  # isolated instance
        return self.ctx.truth.latency_ms(lc.spec.model, batch, lc.share)

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Solo iteration rate at the instance's share."""
        del gpu, busy  # isolated instance
        return 1000.0 / self.ctx.truth.training_iteration_ms(be.spec.model, be.spec.batch, be.share)
