"""Bookkeeping of a run that is not behaviour: period counters, latencies kept, time series."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from arkgpu.colocation.observations import p99_ms
from arkgpu.sim.colocation.metrics import Series
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, PodState


class Recorder:
    """Collects what the metrics need while a run goes."""

    def __init__(
        self, lcs: Sequence[LcRuntime], bes: Sequence[BeRuntime], keep_series: bool
    ) -> None:
        self._lcs, self._bes, self._keep = list(lcs), list(bes), keep_series
        self._arrival_index = dict.fromkeys(lcs, 0)
        self._latencies: dict[LcRuntime, list[NDArray[np.float32]]] = {lc: [] for lc in lcs}
        self._down: dict[BeRuntime, tuple[float, float]] = {}
        self._rows: list[
            tuple[float, list[float], list[float], list[float], list[float], list[float]]
        ] = []
        self._loads: dict[LcRuntime, float] = {}
        self._busy_gpu_s = 0.0
        self._time_s = 0.0
        self._n_gpus = 0

    def arrivals_in_period(self, lc: LcRuntime, now: float) -> int:
        """Requests of ``lc`` that arrived since the last call."""
        j = int(np.searchsorted(lc.arrivals, now, side="right"))
        n = j - self._arrival_index[lc]
        self._arrival_index[lc] = j
        self._loads[lc] = float(n)
        return n

    def keep_latencies(self, lc: LcRuntime) -> None:
        """Keep the period's latencies of ``lc`` for its overall p99."""
        self._latencies[lc].extend(w.astype(np.float32) for w in lc.window)

    def p99_ms(self, lc: LcRuntime) -> float:
        """p99 (ms) over every completed request of ``lc``, NaN when none."""
        return p99_ms(self._latencies[lc] + [w.astype(np.float32) for w in lc.window])

    def note_down(self, be: BeRuntime, now: float) -> None:
        """``be`` is down from ``now`` until its ``down_until``."""
        self._down[be] = (now, be.down_until)

    def down_overlap(self, be: BeRuntime, start: float, end: float) -> float:
        """Seconds of [start, end] during which ``be`` was down."""
        lo, hi = self._down.get(be, (0.0, 0.0))
        return max(0.0, min(end, hi) - max(start, lo))

    def record(
        self, now: float, gpus: Sequence[GpuRuntime], busy: Mapping[LcRuntime, float], period: float
    ) -> None:
        """Close a control period: utilisation and, when kept, one row of each series."""
        self._n_gpus = len(gpus)
        for gpu in gpus:
            if any(b.rate > 0 for b in gpu.running_bes()):
                frac = 1.0
            else:
                frac = min(1.0, sum(busy.get(lc, 0.0) for lc in gpu.lcs))
            self._busy_gpu_s += frac * period
        self._time_s += period
        if not self._keep:
            return
        p99 = [p99_ms(lc.window) for lc in self._lcs]
        running = [lc.state is PodState.RUNNING for lc in self._lcs]
        self._rows.append(
            (
                now,
                [self._loads.get(lc, 0.0) / period for lc in self._lcs],
                [lc.share if up else 0.0 for lc, up in zip(self._lcs, running, strict=True)],
                p99,
                [b.share if b.active else 0.0 for b in self._bes],
                [b.rate if b.active else 0.0 for b in self._bes],
            )
        )

    def gpu_util_pct(self) -> float:
        """Mean busy fraction over GPUs and time, %."""
        if self._time_s <= 0 or self._n_gpus == 0:
            return 0.0
        return 100.0 * self._busy_gpu_s / (self._time_s * self._n_gpus)

    def series(self) -> Series | None:
        """The recorded time series, or None when not kept."""
        if not self._keep:
            return None
        n_lc, n_be = len(self._lcs), len(self._bes)

        def col(i: int, width: int) -> NDArray[np.float64]:
            return np.array([r[i] for r in self._rows], dtype=np.float64).reshape(-1, width)

        return Series(
            t=np.array([r[0] for r in self._rows]),
            lc_names=tuple(lc.name for lc in self._lcs),
            lc_load_rps=col(1, n_lc),
            lc_share=col(2, n_lc),
            lc_p99_ms=col(3, n_lc),
            lc_target_ms=np.array([lc.spec.target_ms for lc in self._lcs]),
            be_names=tuple(b.name for b in self._bes),
            be_share=col(4, n_be),
            be_rate=col(5, n_be),
        )
