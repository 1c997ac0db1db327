"""``tgs``: TGS-style adaptive rate control of BE work (Wu et al., NSDI 2023).

Contexts time-slice the GPU (TGS works below the container, without MPS); BE
kernel launches are paced to a rate ``r``, the fraction of GPU time the BE
jobs of a GPU may take. While a BE job runs, an LC batch gets the other
``1 - r``, shared with the other busy LC services: latency
``L(b, 1.0) * n_LC / (1 - r)``. BE jobs get ``r`` together.

Control law, every control period, on the LC throughput signal (TGS watches
the production job's throughput, not its latency): if any LC service of the
GPU is falling behind (its queue holds more than a full batch and grew since
the last period) ``r <- max(r_min, r * decrease)``; otherwise
``r <- min(r_max, r + increase)``. ``r`` starts at ``r_min``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.colocation.observations import GpuObservations
from arkgpu.sim.colocation.modes.base import SharingMode, register_mode, spread
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod


@register_mode("tgs")
class TgsMode(SharingMode):
    """Time slicing with AIMD-paced BE work."""

    def _rate(self, gpu: GpuRuntime) -> float:
        return gpu.control.setdefault("rate", self.ctx.options.tgs_min_rate)

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """The GPU with the fewest pods (TGS does not place)."""
        return spread(pod, gpus)

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Solo latency stretched by the BE rate and the other busy LC services."""
        n_lc = 1 + sum(1 for o in gpu.lcs if o.busy and o is not lc)
        left = 1.0 - self._rate(gpu) if gpu.running_bes() else 1.0
        return self.ctx.truth.latency_ms(lc.spec.model, batch, 1.0) * n_lc / left

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Whole-GPU rate times the BE rate, split among the GPU's BE jobs."""
        del busy  # the rate limit, not LC activity, bounds BE work
        frac = self._rate(gpu) / len(gpu.running_bes())
        full = self.ctx.truth.training_iteration_ms(be.spec.model, be.spec.batch, 1.0)
        return 1000.0 * frac / full

    def on_tick(self, gpu: GpuRuntime, observations: GpuObservations) -> None:
        """Multiplicative decrease when an LC service falls behind, additive increase otherwise."""
        opts, rate = self.ctx.options, self._rate(gpu)
        behind = False
        for o in observations.lcs:
            previous = gpu.control.get(f"queued:{o.name}", 0.0)
            gpu.control[f"queued:{o.name}"] = float(o.queued)
            behind |= o.queued > o.demand.max_batch and o.queued > previous
        if behind:
            rate = max(opts.tgs_min_rate, rate * opts.tgs_decrease)
        else:
            rate = min(opts.tgs_max_rate, rate + opts.tgs_increase)
        gpu.control["rate"] = rate
