"""``hami``: HAMi's static memory cap and static compute limit per pod, no change at run time.

Pods request ``nvidia.com/gpucores`` and ``nvidia.com/gpumem``. The requests
given here are the strongest static choice: an LC service asks for the smallest
utilisation limit that the fitted predictor says meets its target at its peak
rate under pacing (:func:`pacing_limit`, ArkGPU's own sizing rule, so this
baseline is not handicapped by a guess), a BE job for what the LC services of
its GPU leave (at least 10%). A GPU takes a pod only if the
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

import numpy as np

from arkgpu.colocation.sizing import ShareSizer
from arkgpu.sim.colocation.modes.base import ModeContext, SharingMode, register_mode
from arkgpu.sim.colocation.modes.timeslice import be_time_fraction, contexts_with_work
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod

_BE_MIN_LIMIT = 0.1
"""Smallest compute limit given to a BE job."""


def pacing_limit(lc: LcRuntime, sizer: ShareSizer) -> float:
    """Smallest utilisation limit (1% grid) meeting the LC target at its peak, predicted.

    Under pacing a batch of work ``W = L(b, 1.0)`` takes ``W / limit``: the
    sizing rule of :mod:`arkgpu.colocation.sizing` applied with that latency.
    """
    s, c = lc.spec, sizer.config
    full = np.array(
        [sizer.predictor.latency_ms(s.model, b, 1.0, sizer.gpu) for b in range(1, s.max_batch + 1)]
    )
    batches = np.arange(1, s.max_batch + 1)
    for limit in np.arange(0.05, 1.0001, 0.01):
        lat = full / limit
        fast = batches / lat >= c.load_margin * s.peak_rps / 1000.0
        if fast.any():
            b = int(np.argmax(fast))
            if s.max_queue_delay_ms + 2.0 * lat[b] <= c.headroom * s.target_ms:
                return float(limit)
    return 1.0


@register_mode("hami")
class HamiMode(SharingMode):
    """Static compute and memory limits, time-sliced contexts, token-bucket pacing."""

    def __init__(self, ctx: ModeContext) -> None:
        super().__init__(ctx)
        self._limits: dict[str, float] = {}

    def limit(self, pod: Pod) -> float:
        """Static compute limit an LC service requests (the pacing it can bear at its peak)."""
        if isinstance(pod, BeRuntime):
            return _BE_MIN_LIMIT
        if pod.name not in self._limits:
            self._limits[pod.name] = pacing_limit(pod, self.ctx.sizer)
        return self._limits[pod.name]

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
