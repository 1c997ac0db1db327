"""``hami``: HAMi's static memory cap and static compute limit per pod, no change at run time.

Pods request ``nvidia.com/gpucores`` and ``nvidia.com/gpumem``. The requests
given here are the strongest static choice: an LC service asks for the share
the fitted predictor says it needs at its peak rate (the same sizing ArkGPU
uses, so this baseline is not handicapped by a guess), a BE job for what the
LC services of its GPU leave (at least 10%). A GPU takes a pod only if the
compute limits add up to at most 100% and the memory caps fit (so nobody runs
out of memory); among those, the one with the fewest pods.

Without MPS, contexts of different pods time-slice the GPU; HAMi-core paces
each pod's kernel launches so that its utilisation stays under its limit
(a token bucket refilled at the limit, ``hami_bucket_s`` of refill deep). A
batch with work ``W = L(b, 1.0)`` sharing time with ``n - 1`` other busy
contexts takes ``max(W * n, (W - tokens) / limit)``. A BE job gets
``min(its limit, its time-slice fraction)`` of the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.colocation.sizing import LcDemand
from arkgpu.sim.colocation.modes.base import SharingMode, register_mode
from arkgpu.sim.colocation.modes.timeslice import be_time_fraction, contexts_with_work
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod

_BE_MIN_LIMIT = 0.1
"""Smallest compute limit given to a BE job."""


@register_mode("hami")
class HamiMode(SharingMode):
    """Static compute and memory limits, time-sliced contexts, token-bucket pacing."""

    def limit(self, pod: Pod) -> float:
        """Static compute limit an LC service requests (its predicted peak share)."""
        if isinstance(pod, BeRuntime):
            return _BE_MIN_LIMIT
        s = pod.spec
        demand = LcDemand(s.model, s.target_ms, s.peak_rps, s.max_batch, s.max_queue_delay_ms)
        share = self.ctx.sizer.required_share(demand)
        return 1.0 if share is None else share

    def place(self, pod: Pod, gpus: Sequence[GpuRuntime]) -> int | None:
        """Fewest pods among GPUs whose limits and memory still fit."""
        need = self.limit(pod)
        fits = [
            (len(g.pods()), g.index)
            for g in gpus
            if sum(self.limit(p) for p in g.pods()) + need <= 1.0 + 1e-9
            and g.used_memory_mib() + pod.mem_mib <= g.memory_mib
        ]
        return min(fits)[1] if fits else None

    def reshare(self, gpu: GpuRuntime) -> None:
        """LC limits as requested; BE jobs split what is left."""
        lc_total = 0.0
        for lc in gpu.lcs:
            lc.share = self.limit(lc)
            lc_total += lc.share
        bes = gpu.running_bes()
        for be in bes:
            be.share = max(_BE_MIN_LIMIT, (1.0 - lc_total) / len(bes))

    def lc_batch_ms(self, lc: LcRuntime, batch: int, gpu: GpuRuntime) -> float:
        """Time-sliced solo latency, throttled by the token bucket."""
        work_s = self.ctx.truth.latency_ms(lc.spec.model, batch, 1.0) / 1000.0
        now, limit = lc.batch_start, lc.share
        depth = limit * self.ctx.options.hami_bucket_s
        tokens = min(depth, lc.tokens_s + limit * (now - lc.tokens_at))
        wall = work_s * contexts_with_work(lc, gpu)
        if work_s > tokens:
            wall = max(wall, (work_s - tokens) / limit)
        lc.tokens_s = min(depth, max(0.0, tokens - work_s + limit * wall))
        lc.tokens_at = now + wall
        return wall * 1000.0

    def be_rate(self, be: BeRuntime, gpu: GpuRuntime, busy: Mapping[LcRuntime, float]) -> float:
        """Whole-GPU rate times min(limit, time-slice fraction)."""
        frac = min(be.share, be_time_fraction(gpu, busy))
        full = self.ctx.truth.training_iteration_ms(be.spec.model, be.spec.batch, 1.0)
        return 1000.0 * frac / full
