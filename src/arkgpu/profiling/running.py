"""The profiling run: every point of a plan not done yet, measured under the limiter.

Each model gets one worker process (:mod:`arkgpu.profiling.workers`) in its own
container of the limiter, started when its first point comes; a point sets
the compute share in the container's limits (the limiter reads them on every
launch), runs the worker's warm-up and measuring window, and is written
atomically with the GPU utilisation NVML saw over the window. A pair point
runs its two workers at once, each on its own share. After each point the
canonical profiles are rewritten from every point in the folder, so an
interrupted run leaves usable profiles and a rerun carries on where it stopped.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import arkgpu
from arkgpu.limiter import Limits
from arkgpu.limiter.containers import FakeContainer, make_world_readable
from arkgpu.model.shares import share_bp
from arkgpu.profiling.looping import Window
from arkgpu.profiling.nvml import GpuIdentity, Nvml, UtilSampler
from arkgpu.profiling.plans import PairPoint, Plan, Point, SoloPoint, point_s, safe
from arkgpu.profiling.progress import Display, Eta
from arkgpu.profiling.results import Measured, RunFolder
from arkgpu.profiling.stats import LatencyStats
from arkgpu.profiling.workers import Backend, Worker


class Workers:
    """One worker per (model, slot), each in its own container; stopped on exit."""

    def __init__(self, backend: Backend, logs: Path) -> None:
        self.backend = backend
        self.logs = logs
        self.tmp = Path(tempfile.mkdtemp(prefix="arkgpu-profile-"))
        make_world_readable(self.tmp)
        self.running: dict[tuple[str, int], tuple[Worker, FakeContainer]] = {}

    def get(self, model: str, slot: int, share: float) -> Worker:
        """The worker of ``model`` (started if needed), with its share set to ``share``."""
        limits = Limits((None,), share_bp(share))
        key = (model, slot)
        if key not in self.running:
            region = self.tmp / f"{safe(model)}-{slot}"
            state = self.backend.fake_state or self.tmp / "unused"
            container = FakeContainer.create(region, state, limits)
            log = self.logs / f"{safe(model)}-{slot}.log"
            self.running[key] = (self.backend.start(model, container, log), container)
        worker, container = self.running[key]
        container.set_limits(limits)
        return worker

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for worker, _ in self.running.values():
            worker.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Summary:
    """What a run did."""

    points: int
    """Points in the plan."""
    skipped: int
    """Points found done and not measured again."""
    measured: int
    """Points measured by this run."""
    seconds: float
    """Wall time of this run, s."""
    solo_file: Path
    """The canonical solo profile (header only when no point was ever finished)."""
    pair_file: Path
    """The canonical pair profile."""


def _window(plan: Plan) -> Window:
    t = plan.timing
    return Window(t.warmup_s, t.measure_s, t.min_iterations, t.max_iterations)


def _measured(name: str, point: SoloPoint, run: tuple[list[float], float]) -> Measured:
    return Measured(name, point.batch, point.share, LatencyStats.of(run[0]))


def _with_util(m: Measured, util: tuple[float | None, float | None]) -> Measured:
    return Measured(m.model, m.batch, m.share, m.latency, util[0], util[1])


class Profiler:
    """Runs a plan's pending points with one backend on one GPU."""

    def __init__(self, plan: Plan, backend: Backend, nvml: Nvml, identity: GpuIdentity) -> None:
        self.plan = plan
        self.backend = backend
        self.nvml = nvml
        self.identity = identity
        self.window = _window(plan)

    def _solo(self, workers: Workers, point: SoloPoint) -> list[Measured]:
        worker = workers.get(point.model, 0, point.share)
        with UtilSampler(self.nvml) as sampler:
            run = worker.run(point.batch, self.window)
        name = self.backend.profile_name(point.model)
        return [_with_util(_measured(name, point, run), sampler.mean_after(run[1]))]

    def _pair(self, workers: Workers, point: PairPoint) -> list[Measured]:
        a = workers.get(point.a.model, 0, point.a.share)
        b = workers.get(point.b.model, 1 if point.b.model == point.a.model else 0, point.b.share)
        with UtilSampler(self.nvml) as sampler, ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(w.run, p.batch, self.window) for w, p in ((a, point.a), (b, point.b))
            ]
            run_a, run_b = runs[0].result(), runs[1].result()
        util = sampler.mean_after(max(run_a[1], run_b[1]))
        names = [self.backend.profile_name(p.model) for p in (point.a, point.b)]
        return [
            _with_util(_measured(names[0], point.a, run_a), util),
            _with_util(_measured(names[1], point.b, run_b), util),
        ]

    def measure(self, workers: Workers, point: Point) -> list[Measured]:
        """Run one point and return its result(s)."""
        if isinstance(point, SoloPoint):
            return self._solo(workers, point)
        return self._pair(workers, point)

    def source_text(self) -> str:
        """SOURCE.md of the output folder."""
        g, t = self.identity, self.plan.timing
        return (
            f"# Profiles measured by `arkgpu profile run` (arkgpu {arkgpu.__version__})\n\n"
            f"- GPU: {g.nvml_name} (profile name `{g.gpu}`), driver {g.driver}\n"
            f"- backend: {self.backend.name}; compute shares enforced by the ArkGPU limiter\n"
            f"- last point written: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}\n"
            f"- per point: {t.warmup_s:g} s warm-up, {t.measure_s:g} s measured "
            f"(at least {t.min_iterations} batches); `latency_ms` is the median batch "
            "latency, `*_stats.csv` add p99, std and NVML utilisation\n"
            "- `l2_util_pct` is empty (NVML has no L2 counter); `dram_util_pct` is NVML's "
            "memory-busy time % when above 0 (docs/PROFILING.md)\n"
        )


def _open_folder(profiler: Profiler, out: Path) -> RunFolder:
    folder = RunFolder(out)
    (out / "logs").mkdir(exist_ok=True)
    doc = {"gpu": asdict(profiler.identity), "backend": profiler.backend.name}
    folder.check_run({**doc, "plan": asdict(profiler.plan)})
    return folder


def _measure_and_save(
    profiler: Profiler, folder: RunFolder, workers: Workers, point: Point
) -> list[Measured]:
    measured = profiler.measure(workers, point)
    extra = {"label": point.label(), "timing": asdict(profiler.plan.timing)}
    folder.save(point, measured, {**extra, "finished": _now()})
    folder.write_profiles(profiler.identity, profiler.source_text())
    return measured


def run_plan(profiler: Profiler, out: Path, display: Display) -> Summary:
    """Measure every point of the plan that ``out`` does not hold yet."""
    started = time.monotonic()
    folder = _open_folder(profiler, out)
    points = profiler.plan.points()
    pending = [p for p in points if not folder.done(p)]
    startup = profiler.backend.startup_s
    models = {m for p in pending for m in _models(p)}
    eta = Eta(point_s(profiler.plan.timing), len(models) * startup)
    display.start(len(points), len(points) - len(pending), eta.left_s(len(pending)))
    try:
        with Workers(profiler.backend, out / "logs") as workers:
            for number, point in enumerate(pending, 1):
                t0, before = time.monotonic(), len(workers.running)
                measured = _measure_and_save(profiler, folder, workers, point)
                eta.record(time.monotonic() - t0, (len(workers.running) - before) * startup)
                text = f"{point.label()}: {_text(measured)}"
                done = len(points) - len(pending) + number
                display.point(text, done, len(points), eta.left_s(len(pending) - number))
    finally:
        display.stop()
        # also when interrupted between a point's file and the profiles' rewrite
        solo_file, pair_file = folder.write_profiles(profiler.identity, profiler.source_text())
    skipped = len(points) - len(pending)
    seconds = time.monotonic() - started
    return Summary(len(points), skipped, len(pending), seconds, solo_file, pair_file)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _models(point: Point) -> list[str]:
    return [point.model] if isinstance(point, SoloPoint) else [point.a.model, point.b.model]


def _text(measured: list[Measured]) -> str:
    return ", ".join(
        f"median {m.latency.median_ms:.3g} ms p99 {m.latency.p99_ms:.3g} ms" for m in measured
    )
