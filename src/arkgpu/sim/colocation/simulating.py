"""The co-location simulation: LC batchers and BE jobs on shared GPUs, one mode, one seed.

Events are batch-level: a batcher wakes when its queue may form a batch,
starts a batch (its latency drawn from the ground truth through the mode), and
completes it, when every request of the batch is counted against its target
with numpy. Arrivals are precomputed per service. BE jobs progress as a fluid,
integrated once per control period from the mode's rate. A control tick also
measures each LC service (rate, p99, queue), runs adaptive modes and records
the time series. Random streams are keyed by seed and application name, so an
application sees the same arrivals under every mode and when run alone.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field

import numpy as np

from arkgpu.colocation.observations import GpuObservations, LcObservation, observe_lc
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.model.gpus import gpu_model
from arkgpu.sim.colocation.loads import load_curve, poisson_arrivals
from arkgpu.sim.colocation.metrics import BeResult, LcResult, RunResult
from arkgpu.sim.colocation.modes import ModeContext, ModeOptions, SharingMode, mode_class
from arkgpu.sim.colocation.recording import Recorder
from arkgpu.sim.colocation.runtime import BeRuntime, GpuRuntime, LcRuntime, Pod, PodState
from arkgpu.sim.colocation.scenarios import LcSpec, Scenario
from arkgpu.sim.colocation.truth import GroundTruth
from arkgpu.sim.engine import Environment

_EPS = 1e-9


@dataclass(frozen=True)
class RunOptions:
    """Settings of one run beyond scenario, mode and seed."""

    modes: ModeOptions = field(default_factory=ModeOptions)
    """Mechanism parameters of the modes."""
    record_series: bool = True
    """Keep per-period time series (for plots)."""


def stream(seed: int, purpose: int, name: str) -> np.random.Generator:
    """The random stream of one application for one purpose (0 arrivals, 1 noise)."""
    return np.random.default_rng([seed, purpose, zlib.crc32(name.encode())])


class CoLocationSim:
    """One run: build with a scenario, mode key, seed, ground truth and sizer; call :meth:`run`."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        mode: str,
        seed: int,
        truth: GroundTruth,
        sizer: ShareSizer,
        options: RunOptions | None = None,
    ) -> None:
        self.scenario, self.seed = scenario, seed
        self.options = options or RunOptions()
        self.env = Environment()
        memory = gpu_model(scenario.gpu).memory_mib
        ctx = ModeContext(scenario, truth, sizer, memory, self.options.modes)
        self.mode: SharingMode = mode_class(mode)(ctx)
        self.truth = truth
        self.gpus = [GpuRuntime(i, memory) for i in range(scenario.gpus)]
        self.lcs = [self._lc(spec) for spec in scenario.lcs]
        self.bes = [BeRuntime(b, stream(seed, 1, b.name)) for b in scenario.bes]
        self.pending: list[Pod] = [*self.lcs, *self.bes]
        self.tick_start = 0.0
        self.used: set[int] = set()
        self.recorder = Recorder(self.lcs, self.bes, self.options.record_series)

    def _lc(self, s: LcSpec) -> LcRuntime:
        sc = self.scenario
        arrivals = poisson_arrivals(
            load_curve(s.load_curve),
            peak_rps=s.peak_rps,
            day_s=sc.day_s,
            duration_s=sc.duration_s,
            phase_h=s.phase_h,
            rng=stream(self.seed, 0, s.name),
        )
        return LcRuntime(s, arrivals, stream(self.seed, 1, s.name))

    # -- placement -------------------------------------------------------------
    def _admit(self) -> None:
        still: list[Pod] = []
        for pod in self.pending:
            index = self.mode.place(pod, self.gpus)
            if index is None:
                still.append(pod)
                continue
            gpu = self.gpus[index]
            pod.gpu = index
            over = gpu.used_memory_mib() + pod.mem_mib > gpu.memory_mib
            pod.state = PodState.FAILED if over else PodState.RUNNING
            if isinstance(pod, LcRuntime):
                gpu.lcs.append(pod)
            else:
                gpu.bes.append(pod)
            if pod.state is PodState.RUNNING:
                self.used.add(index)
                self.mode.reshare(gpu)
                if isinstance(pod, LcRuntime):
                    self._kick(pod)
        self.pending = still

    # -- LC batcher ------------------------------------------------------------
    def _kick(self, lc: LcRuntime) -> None:
        """Start a batch if the batcher would now, else wake it when it will (arrivals known)."""
        if lc.busy or lc.state is not PodState.RUNNING:
            return
        now, arr, head = self.env.now, lc.arrivals, lc.head
        if now < lc.down_until:
            self._wake(lc, lc.down_until)
            return
        if head >= len(arr):
            return
        mb = lc.spec.max_batch
        # the batcher starts when the oldest request has waited the queue delay or a batch is full
        start = float(arr[head]) + lc.spec.max_queue_delay_ms / 1000.0
        if head + mb - 1 < len(arr):
            start = min(start, float(arr[head + mb - 1]))
        if start > now + _EPS:
            self._wake(lc, start)
            return
        avail = int(arr.searchsorted(now, side="right")) - head
        self._start(lc, min(avail, mb))

    def _wake(self, lc: LcRuntime, at: float) -> None:
        if lc.wake is not None:
            lc.wake.cancel()
        lc.wake = self.env.schedule(max(at, self.env.now), lambda: self._kick(lc))

    def _start(self, lc: LcRuntime, batch: int) -> None:
        now = self.env.now
        lc.busy, lc.batch, lc.batch_lo, lc.batch_start = True, batch, lc.head, now
        lc.head += batch
        assert lc.gpu is not None
        ms = self.mode.lc_batch_ms(lc, batch, self.gpus[lc.gpu])
        duration = self.truth.sample(ms, lc.spec.model, lc.rng) / 1000.0
        lc.completion = self.env.schedule(now + duration, lambda: self._done(lc))

    def _done(self, lc: LcRuntime) -> None:
        now = self.env.now
        lo, hi = lc.batch_lo, lc.batch_lo + lc.batch
        arr = lc.arrivals
        lc.completed += lc.batch
        # requests that arrived at or after now - target are within the target
        first_good = int(arr.searchsorted(now - lc.spec.target_ms / 1000.0 - _EPS, side="left"))
        lc.good += hi - max(lo, min(first_good, hi))
        lc.window.append(now - arr[lo:hi])
        lc.window_done += lc.batch
        lc.executed.append((lc.batch, now - lc.batch_start))
        lc.busy_s += now - max(lc.batch_start, self.tick_start)
        lc.busy_total_s += now - lc.batch_start
        lc.busy, lc.completion = False, None
        self._kick(lc)

    # -- faults (MPS fault domain) ---------------------------------------------
    def _schedule_fault(self, gpu: GpuRuntime, rng: np.random.Generator) -> None:
        rate = self.options.modes.fault_rate_per_h / 3600.0 * max(1, len(gpu.pods()))
        at = self.env.now + float(rng.exponential(1.0 / rate))
        if at < self.scenario.duration_s:
            self.env.schedule(at, lambda: self._fault(gpu, rng), priority=2)

    def _fault(self, gpu: GpuRuntime, rng: np.random.Generator) -> None:
        """A client fault: every client of the GPU fails and restarts after ``restart_s``."""
        now, restart = self.env.now, self.options.modes.restart_s
        for lc in gpu.lcs:
            if lc.state is not PodState.RUNNING:
                continue
            if lc.busy and lc.completion is not None:
                lc.completion.cancel()
                lc.lost += lc.batch
                lc.busy_s += now - max(lc.batch_start, self.tick_start)
                lc.busy, lc.completion = False, None
            lc.down_until = now + restart
            self._wake(lc, lc.down_until)
        for be in gpu.running_bes():
            be.down_until = now + restart
            self.recorder.note_down(be, now)
        self._schedule_fault(gpu, rng)

    # -- control period --------------------------------------------------------
    def _tick(self) -> None:
        now = self.env.now
        period = now - self.tick_start
        if period <= 0:
            return
        busy = {}
        for lc in self.lcs:
            if lc.busy:
                lc.busy_s += now - max(lc.batch_start, self.tick_start)
            busy[lc] = min(1.0, lc.busy_s / period)
        finished = [be for be in self.bes if be.active and self._advance(be, busy, period)]
        for gpu in self.gpus:
            self.mode.on_tick(gpu, self._observe_gpu(gpu, period))
        self.recorder.record(now, self.gpus, busy, period)
        for lc in self.lcs:
            lc.busy_s, lc.window, lc.window_done, lc.executed = 0.0, [], 0, []
        for be in finished:
            assert be.gpu is not None
            self.mode.reshare(self.gpus[be.gpu])
        if finished and self.pending:
            self._admit()
        self.tick_start = now
        nxt = min(now + self.scenario.control_period_s, self.scenario.duration_s)
        if nxt > now + _EPS:
            self.env.schedule(nxt, self._tick, priority=1)

    def _advance(self, be: BeRuntime, busy: dict[LcRuntime, float], period: float) -> bool:
        """Integrate a BE job over the period; True when it finished."""
        assert be.gpu is not None
        rate = self.mode.be_rate(be, self.gpus[be.gpu], busy)
        rate /= self.truth.sample(1.0, be.spec.model, be.rng)
        up = period - self.recorder.down_overlap(be, self.tick_start, self.env.now)
        be.rate = rate * up / period
        be.iterations += rate * up
        if be.iterations < be.spec.iterations:
            return False
        extra = (be.iterations - be.spec.iterations) / rate if rate > 0 else 0.0
        be.iterations = float(be.spec.iterations)
        be.finished_at = self.env.now - extra
        be.state = PodState.FINISHED
        return True

    def _observe_gpu(self, gpu: GpuRuntime, period: float) -> GpuObservations:
        """What the control loop of ``gpu`` sees of the period that ends now."""
        lcs = tuple(self._observe(lc, period) for lc in gpu.lcs if lc.state is PodState.RUNNING)
        return GpuObservations(gpu.index, lcs, gpu.be_observations(), period)

    def _observe(self, lc: LcRuntime, period: float) -> LcObservation:
        now = self.env.now
        observation = observe_lc(
            lc.name,
            lc.spec,
            arrived=self.recorder.arrivals_in_period(lc, now),
            period_s=period,
            latencies_s=lc.window,
            queued=lc.queued(now),
            memory_mib=lc.mem_mib,
            batches=lc.executed,
        )
        self.recorder.keep_latencies(lc)
        return observation

    # -- run -------------------------------------------------------------------
    def run(self) -> RunResult:
        """Simulate the whole horizon and return the results."""
        started, cpu = time.perf_counter(), time.process_time()
        self.mode.check()
        self._admit()
        if self.mode.fault_domain and self.options.modes.fault_rate_per_h > 0:
            for gpu in self.gpus:
                self._schedule_fault(gpu, stream(self.seed, 2, f"gpu{gpu.index}"))
        sc = self.scenario
        self.env.schedule(min(sc.control_period_s, sc.duration_s), self._tick, priority=1)
        self.env.run(sc.duration_s)
        return self._result(time.perf_counter() - started, time.process_time() - cpu)

    def _result(self, wall_s: float, cpu_s: float) -> RunResult:
        lcs = tuple(self._lc_result(lc) for lc in self.lcs)
        bes = tuple(
            BeResult(
                b.name,
                b.spec.model,
                b.state.value,
                b.iterations,
                1000.0 / self.truth.training_iteration_ms(b.spec.model, b.spec.batch, 1.0),
                b.finished_at,
                b.spec.iterations,
            )
            for b in self.bes
        )
        return RunResult(
            self.scenario.name,
            self.mode.key,
            self.seed,
            self.scenario.duration_s,
            self.scenario.gpus,
            lcs,
            bes,
            self.recorder.gpu_util_pct(),
            len(self.used),
            self.env.events_fired,
            wall_s,
            cpu_s,
            self.recorder.series(),
        )

    def _lc_result(self, lc: LcRuntime) -> LcResult:
        in_flight = lc.batch if lc.busy else 0
        unserved = len(lc.arrivals) - lc.head + in_flight
        return LcResult(
            lc.name,
            lc.spec.model,
            lc.spec.target_ms,
            lc.state.value,
            len(lc.arrivals),
            lc.completed,
            lc.good,
            lc.lost,
            unserved,
            self.recorder.p99_ms(lc),
        )
