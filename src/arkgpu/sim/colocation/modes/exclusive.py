"""``k8s-native``: one pod per whole GPU (``nvidia.com/gpu: 1`` with NVIDIA's device plugin).

A pod gets a GPU only when one is empty; otherwise it waits (pending) until a
BE job finishes and frees its GPU. A batch runs alone on the whole GPU: its
latency is the measured solo latency at share 1.0, with no interference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.sim.colocation.modes.base import SharingMode, register_mode, spread
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod


@register_mode("k8s-native")
class ExclusiveMode(SharingMode):
    """Whole GPUs, one pod each."""

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """An empty GPU, or None (the pod waits)."""
        return spread(pod, gpus, exclusive=True)

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Solo latency on the whole GPU."""
        del gpu  # alone on its GPU
        return self.ctx.truth.latency_ms(lc.spec.model, batch, 1.0)

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """One iteration per whole-GPU iteration time."""
        del gpu, busy  # alone on its GPU
        return 1000.0 / self.ctx.truth.training_iteration_ms(be.spec.model, be.spec.batch, 1.0)
