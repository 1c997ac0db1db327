"""``mps`` and ``mps-equal``: CUDA MPS spatial sharing, one fault domain per GPU.

``mps`` (MPS defaults, no active-thread limit): every client may use all SMs.
When clients execute at once the SMs are split max-min fairly among them, each
capped at the share it can use (its saturation share from the measured
profile); a batch's latency is the measured latency at that share times the
measured pair interference of the clients executing at its start. A BE job's
share over a period is the same split with each LC service weighted by its
busy fraction.

``mps-equal``: every client gets a static active-thread percentage of
``1 / n`` for the ``n`` pods of its GPU (set when pods arrive or leave).

Both: pods spread over GPUs (fewest pods first); memory is not isolated (a
pod that over-commits the GPU's memory fails); a client fault takes down every
client of the GPU (``ModeOptions.fault_rate_per_h``, default 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.sim.colocation.modes.base import (
    SharingMode,
    be_corunners,
    busy_corunners,
    register_mode,
    spread,
    waterfill,
)
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod


class _MpsBase(SharingMode):
    fault_domain = True

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """The GPU with the fewest pods."""
        return spread(pod, gpus)

    def memory_isolated(self) -> bool:
        """MPS does not cap client memory by default."""
        return False

    def _lc_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime, share: float) -> float:
        truth = self.ctx.truth
        slow = truth.slowdown(lc.spec.model, batch, share, busy_corunners(lc, gpu))
        return truth.latency_ms(lc.spec.model, batch, share) * slow

    def _be_rate(
        self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float], share: float
    ) -> float:
        if share <= 0:
            return 0.0
        truth, model, batch = self.ctx.truth, be.spec.model, be.spec.batch
        slow = truth.slowdown(model, batch, share, be_corunners(be, gpu, busy))
        return 1000.0 / (truth.training_iteration_ms(model, batch, share) * slow)


@register_mode("mps")
class MpsDefaultMode(_MpsBase):
    """MPS with no active-thread limit."""

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Latency at the max-min fair share among the clients executing now."""
        sat = self.ctx.truth.saturation_share
        demands = [sat(lc.spec.model, batch)]
        demands += [sat(o.spec.model, max(o.batch, 1)) for o in gpu.lcs if o.busy and o is not lc]
        demands += [sat(b.spec.model, b.spec.batch) for b in gpu.running_bes()]
        return self._lc_ms(lc, batch, gpu, waterfill(demands)[0])

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Rate at the fair share with LC demands weighted by their busy fractions."""
        sat = self.ctx.truth.saturation_share
        demands = [sat(be.spec.model, be.spec.batch)]
        demands += [sat(b.spec.model, b.spec.batch) for b in gpu.running_bes() if b is not be]
        demands += [sat(lc.spec.model, max(lc.batch, 1)) * busy.get(lc, 0.0) for lc in gpu.lcs]
        return self._be_rate(be, gpu, busy, waterfill(demands)[0])


@register_mode("mps-equal")
class MpsEqualMode(_MpsBase):
    """MPS with equal static active-thread percentages."""

    def reshare(self, gpu: GpuRuntime) -> None:
        """``1 / n`` for each of the ``n`` pods."""
        pods = gpu.pods()
        for pod in pods:
            pod.share = 1.0 / len(pods)

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Latency at the static share with the interference of busy co-runners."""
        return self._lc_ms(lc, batch, gpu, lc.share)

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Rate at the static share with busy-weighted interference."""
        return self._be_rate(be, gpu, busy, be.share)
