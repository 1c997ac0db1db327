"""The node runtime's control loop: adopt containers, observe, decide, write limits.

Every ``period_s`` the runtime reads each adopted container's region
(:mod:`arkgpu.node.observing`), hands each GPU's observations to the
:class:`~arkgpu.colocation.deciding.NodeController` (the simulator's decision
code) and writes what changed: shares, memory caps and lent shares into the
``limits`` files (:func:`~arkgpu.limiter.region.write_limits`), and the lenders'
usage files at ``lenders/<k>`` of each BE region.

Restart safety: the limits live in the regions, not in the runtime, so the
containers keep their last limits while no runtime runs. A runtime starting
on a node with containers rebuilds each GPU's adjustment unit from the regions
(:meth:`~arkgpu.colocation.deciding.NodeController.restore`) during its first
period and writes nothing then: its first decision continues from the limits
in force, moved only by the control law's response to what it measures.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from arkgpu.colocation.calibration import CALIBRATION_FILE
from arkgpu.colocation.deciding import ContainerDecision, NodeController
from arkgpu.colocation.limiting import limits_for
from arkgpu.colocation.observations import BeObservation, GpuObservations, LcObservation
from arkgpu.limiter.layout import MAX_LENDERS
from arkgpu.limiter.lending import link_lender
from arkgpu.limiter.region import LIMITS_FILE, USAGE_FILE, read_limits, write_limits
from arkgpu.node.backstop import Backstop
from arkgpu.node.calibrating import CalibrationLog, read_published
from arkgpu.node.config import NodeConfig
from arkgpu.node.observing import Container, observe, refresh, skip_old_samples
from arkgpu.node.pods import POD_FILE, read_pod


@dataclass
class TickStats:
    """Counters of the runtime's work (the decisions, for logs and metrics)."""

    ticks: int = 0
    """Control periods run."""
    writes: int = 0
    """Limits files rewritten (a decision that changed something)."""
    adopted: int = 0
    """Containers adopted."""
    forgotten: int = 0
    """Containers forgotten (region gone)."""
    skipped: list[str] = field(default_factory=list)
    """Regions not adopted, with the reason (bad pod.json...), last scan."""


def _complete_regions(root: Path) -> list[str]:
    """Names of the folders in ``root`` holding a region's three files, sorted
    (plain strings: this runs every few periods over every region)."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:  # the folder went: every container with it
        return []
    base = os.fspath(root)
    files = (LIMITS_FILE, USAGE_FILE, POD_FILE)
    return [n for n in names if all(os.path.isfile(f"{base}/{n}/{f}") for f in files)]


class NodeRuntime:
    """The control loop of one node (call :meth:`scan` and :meth:`tick`, or :meth:`run`)."""

    def __init__(self, config: NodeConfig, controller: NodeController, gpus: list[int]) -> None:
        """Drive the containers of ``gpus`` under ``config`` with ``controller``."""
        self.config = config
        self.controller = controller
        self.gpus = set(gpus)
        self.containers: dict[str, Container] = {}
        self.stats = TickStats()
        self._seeding: set[int] = set()
        self._last_tick = time.monotonic()
        self._warned: set[str] = set()
        self.backstop: Backstop | None = None
        """The escape backstop, run every ``scan_every`` periods (None: off)."""
        path = config.regions_dir / CALIBRATION_FILE
        self.calibration = CalibrationLog(path) if controller.config.calibration else None
        """Logs and publishes the online calibration's changes (None: calibration off)."""

    @property
    def last_tick(self) -> float:
        """CLOCK_MONOTONIC (s) of the last tick, or of the runtime's creation."""
        return self._last_tick

    @property
    def rebuilding(self) -> bool:
        """Whether some GPU's state is still being rebuilt from the regions."""
        return bool(self._seeding)

    def start(self) -> None:
        """First scan: adopt what the regions hold and rebuild state from them."""
        self.config.regions_dir.mkdir(parents=True, exist_ok=True)
        self.scan()
        self._seeding = {c.spec.gpu for c in self.containers.values() if c.spec.elastic}
        if self.calibration is not None:
            published = read_published(self.calibration.path)
            for c in self.containers.values():
                if c.name in published:
                    self.controller.seed_corrections(c.spec.gpu, {c.name: published[c.name]})

    def scan(self) -> None:
        """Adopt containers whose regions appeared; forget those whose regions went."""
        self.stats.skipped = []
        found = _complete_regions(self.config.regions_dir)
        kept = set(found)
        for name in [n for n in self.containers if n not in kept]:
            self.containers.pop(name).reader.close()
            self.stats.forgotten += 1
        for name in found:
            if name not in self.containers:
                self._adopt(self.config.regions_dir / name)
        held = {c.spec.gpu for c in self.containers.values()}
        for gpu in [g for g in self.controller.units if g not in held]:
            self.controller.forget(gpu)

    def _adopt(self, region: Path) -> None:
        try:
            spec = read_pod(region)
            limits = read_limits(region)
        except (OSError, ValueError) as exc:
            self._skip(region, str(exc))
            return
        if spec.gpu not in self.gpus:
            self._skip(region, f"GPU {spec.gpu} is not on this node")
            return
        container = Container(spec, region, limits)
        skip_old_samples(container)
        self.containers[spec.name] = container
        self.stats.adopted += 1

    def _skip(self, region: Path, why: str) -> None:
        """Leave ``region`` out this scan; say so once per region and reason."""
        line = f"{region.name}: {why}"
        self.stats.skipped.append(line)
        if line not in self._warned:
            self._warned.add(line)
            print(f"arkgpu node: not adopted: {line}", file=sys.stderr, flush=True)

    def tick(self, period_s: float | None = None) -> None:
        """One control period over every GPU with containers; ``period_s`` overrides the
        measured time since the last tick (replays and tests)."""
        now = time.monotonic()
        period = period_s or max(now - self._last_tick, 1e-3)
        self._last_tick = now
        self.stats.ticks += 1
        if self.stats.ticks % self.config.scan_every == 0:
            self.scan()
            if self.backstop is not None:
                self.backstop.check(list(self.containers.values()))
        by_gpu: dict[int, list[Container]] = {}
        for c in self.containers.values():
            refresh(c)
            if c.spec.elastic:
                by_gpu.setdefault(c.spec.gpu, []).append(c)
        reserved = held_shares(self.containers.values())
        for gpu in sorted(by_gpu):
            self._tick_gpu(gpu, by_gpu[gpu], period, reserved.get(gpu, 0))
        if self.calibration is not None:
            specs = {name: c.spec for name, c in self.containers.items()}
            self.calibration.note(self.controller.corrections(), specs)

    def _tick_gpu(self, gpu: int, mine: list[Container], period: float, reserved: int) -> None:
        live = [c for c in mine if c.active()]
        seen = {c.name: observe(c, period) for c in live}
        obs = GpuObservations(
            gpu,
            tuple(o for o in seen.values() if isinstance(o, LcObservation)),
            tuple(o for o in seen.values() if isinstance(o, BeObservation)),
            period,
            reserved,
        )
        if gpu in self._seeding:
            self._seeding.discard(gpu)
            self.controller.restore(obs, {c.name: c.limits.share_bp for c in live})
            return
        decision = self.controller.tick(obs)
        for entry in decision.containers():
            self._write(self.containers[entry.name], entry)

    def _write(self, container: Container, entry: ContainerDecision) -> None:
        if entry is container.decided or entry == container.decided:  # in force already
            return
        container.decided = entry
        decided = limits_for(entry)  # the first GPU's cap; the others' stay as written
        limits = replace(
            decided,
            memory_bytes=decided.memory_bytes[:1] + container.limits.memory_bytes[1:],
            mode=container.limits.mode,
            burst_us=container.limits.burst_us,
        )
        if entry.lenders != container.lenders:
            self._link(container, entry.lenders)
        if limits != container.limits:
            write_limits(container.region, limits)
            container.limits = limits
            self.stats.writes += 1

    def _link(self, container: Container, lenders: tuple[str, ...]) -> None:
        for k in range(MAX_LENDERS):
            lender = self.containers.get(lenders[k]) if k < len(lenders) else None
            target = lender.region if lender is not None else None
            if target is not None or k < len(container.lenders):
                link_lender(container.region, k, target)
        container.lenders = lenders

    def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Tick every period until ``stop()`` says so."""
        self.start()
        self._last_tick = deadline = time.monotonic()
        while not stop():  # a whole period before each tick: the first measures one too
            deadline += self.config.period_s
            delay = deadline - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                deadline = time.monotonic()
            self.tick()


def held_shares(containers: Iterable[Container]) -> dict[int, int]:
    """Share (basis points) held on each GPU outside its elastic split: a pod without an
    ArkGPU class on every GPU it has, an elastic pod on its GPUs but the first. A container
    no process of which runs (none started yet, or all ended) holds nothing, as it holds no
    slot in its GPU's split: a finished HAMi job's share goes back to the others at once,
    not when the device plugin removes its region. Reads each container's usage as
    :func:`~arkgpu.node.observing.refresh` left it this period."""
    held: dict[int, int] = {}
    for c in containers:
        outside = [g for g in c.spec.gpus or (c.spec.gpu,) if not c.spec.elastic or g != c.spec.gpu]
        if outside and c.active():
            for gpu in outside:
                held[gpu] = held.get(gpu, 0) + c.limits.share_bp
    return held
