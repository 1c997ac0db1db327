"""``timeslice``: NVIDIA time-slicing (device plugin ``replicas``), pods take turns on the GPU.

Every pod sees the whole GPU but contexts run one at a time, round robin, in
equal slices. A batch that starts while ``n - 1`` other contexts have work
(busy LC services, running BE jobs) progresses at ``1 / n`` of the solo speed:
``L(b, 1.0) * n * (1 + overhead)`` (overhead 0 by default, the baseline's best
case). No concurrent kernels, so no co-location interference. A BE job gets
``1 / (n_BE + sum of LC busy fractions)`` of the GPU's time. Placement spreads
pods over GPUs (fewest pods first); memory is not isolated: a pod whose memory
does not fit beside the pods already on its GPU fails (out of memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.sim.colocation.modes.base import SharingMode, register_mode, spread
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod


def contexts_with_work(lc: LcRuntime, gpu: GpuRuntime) -> int:
    """Contexts that compete for time slices when ``lc`` starts a batch (itself included)."""
    others = sum(1 for o in gpu.lcs if o.busy and o is not lc)
    return 1 + others + len(gpu.running_bes())


def be_time_fraction(gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
    """Time fraction each BE job gets when contexts share time equally."""
    n_be = len(gpu.running_bes())
    return 1.0 / max(1.0, n_be + sum(busy.get(lc, 0.0) for lc in gpu.lcs))


@register_mode("timeslice")
class TimeSliceMode(SharingMode):
    """Round-robin time slicing, no memory isolation."""

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """The GPU with the fewest pods."""
        return spread(pod, gpus)

    def memory_isolated(self) -> bool:
        """Time-slicing does not partition memory."""
        return False

    def _overhead(self, n: float) -> float:
        return 1.0 + self.ctx.options.timeslice_overhead if n > 1 else 1.0

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Solo latency stretched by the number of contexts taking turns."""
        n = contexts_with_work(lc, gpu)
        return self.ctx.truth.latency_ms(lc.spec.model, batch, 1.0) * n * self._overhead(n)

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Whole-GPU rate times the BE job's time fraction."""
        frac = be_time_fraction(gpu, busy)
        full = self.ctx.truth.training_iteration_ms(be.spec.model, be.spec.batch, 1.0)
        return 1000.0 * frac / (full * self._overhead(1.0 / frac))
