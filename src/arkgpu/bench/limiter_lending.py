"""Idle-share lending measured on the fake GPU (part of ``arkgpu limiter bench``).

A best-effort (BE) container with its own share borrows the share of one
latency-critical (LC) container (docs/LIMITER.md, Lending). This process plays
the LC server: it only moves the LC container's batches-in-flight counter with
the client library, while the BE container launches 1 ms kernels back to back
for three phases of ``phase_s`` each: LC batch in flight, LC idle, LC batch in
flight again. Figures:

- ``in_flight_pct`` / ``idle_pct``: the BE's busy share in the middle of the
  first and second phases (expected: its own share; own + lent share).
- ``give_back_ms``: from the LC's second ``batch_begin`` until the BE's busy
  share over the trailing window is within 5 points of its own share: how long
  an LC batch shares the GPU with borrowed BE work. It includes up to one
  window of measuring delay.
- ``take_up_ms``: from the LC's ``batch_end`` until the BE's trailing share is
  within 5 points of own + lent share.
- ``lend_check_ns``: median added ns per paced launch when the BE has a lender
  (one ``pread`` of the lender's in-flight block) against none, zero-length
  kernels, alternating runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arkgpu.client import LatencyReporter
from arkgpu.limiter import Limits, link_lender
from arkgpu.limiter.benchmarking import finish_load, start_load, timed_calls
from arkgpu.limiter.containers import FakeContainer, make_world_readable
from arkgpu.model.shares import share_bp


@dataclass(frozen=True)
class LendingConfig:
    """What the lending bench measures and for how long."""

    be_share: float = 30.0
    """The BE container's own share, percent."""
    lent_pct: float = 50.0
    """The share the LC container lends while idle, percent."""
    phase_s: float = 1.5
    """Length of each of the three phases, s."""
    kernel_us: float = 1000.0
    """BE kernel length, µs."""
    window_ms: float = 20.0
    """Trailing window of the give-back and take-up times, ms."""
    check_calls: int = 200_000
    """Launches per timed run of the lending check's cost."""
    repeats: int = 5
    """Alternating with/without-lender pairs of the check's cost."""


class LendingBench:
    """The cases in one work directory, every container on one fake GPU."""

    def __init__(self, config: LendingConfig, workdir: Path) -> None:
        self.config, self.workdir = config, workdir
        self._count = 0
        make_world_readable(workdir)

    def container(self, limits: Limits) -> FakeContainer:
        """A new container on the shared fake GPU."""
        self._count += 1
        return FakeContainer.create(self.workdir / f"c{self._count}", self.workdir / "gpu", limits)

    def pair(self, be_share: float) -> tuple[FakeContainer, FakeContainer]:
        """An LC container and a BE container at ``be_share`` borrowing from it."""
        lc = self.container(Limits((None,)))
        lent = round(self.config.lent_pct * 100)
        be = self.container(
            Limits((None,), share_bp(be_share / 100), lent_bp=(lent,), lend_stale_ms=60_000)
        )
        link_lender(be.region, 0, lc.region)
        return lc, be

    def phases(self) -> dict[str, object]:
        """BE share with the LC in flight, idle, in flight again; the switch times."""
        cfg = self.config
        lc, be = self.pair(cfg.be_share)
        phase_ns = int(cfg.phase_s * 1e9)
        with LatencyReporter(lc.region) as lc_server:
            lc_server.batch_begin()
            proc = start_load(be, 3 * cfg.phase_s, cfg.kernel_us)
            time.sleep(cfg.phase_s)
            ended = time.monotonic_ns()
            lc_server.batch_end()
            time.sleep(cfg.phase_s)
            begun = time.monotonic_ns()
            lc_server.batch_begin()
            result = finish_load(proc)
        window = int(cfg.window_ms * 1e6)
        lending = cfg.be_share + cfg.lent_pct
        return {
            "in_flight_pct": 100 * result.window_share(ended - phase_ns // 2, ended),
            "idle_pct": 100 * result.window_share(begun - phase_ns // 2, begun),
            "again_pct": 100 * result.window_share(begun + phase_ns // 2, result.t_ns[-1]),
            "give_back_ms": result.first_within(begun, window, lambda s: s <= cfg.be_share + 5),
            "take_up_ms": result.first_within(ended, window, lambda s: s >= lending - 5),
        }

    def check_cost(self) -> dict[str, object]:
        """Added ns per paced launch with one lender, alternating with none."""
        plain = self.container(Limits((None,), 9_900))
        _, lending = self.pair(99.0)
        cases = []
        for _ in range(self.config.repeats):
            base = timed_calls(plain, "launch", self.config.check_calls)
            with_lender = timed_calls(lending, "launch", self.config.check_calls)
            cases.append(
                {"without_ns": base, "with_ns": with_lender, "added_ns": with_lender - base}
            )
        return {"median": statistics.median(c["added_ns"] for c in cases), "cases": cases}


def run_lending_bench(
    config: LendingConfig, progress: Callable[[str], None] = lambda _: None
) -> dict[str, object]:
    """Run the lending cases and return the report (the ``lending`` part of the JSON)."""
    with tempfile.TemporaryDirectory(prefix="arkgpu-lending-") as tmp:
        bench = LendingBench(config, Path(tmp))
        progress("lending: LC in flight, idle, in flight again")
        phases = bench.phases()
        progress("lending: cost of the lender check per paced launch")
        cost = bench.check_cost()
    return {
        "be_share_pct": config.be_share,
        "lent_pct": config.lent_pct,
        "phase_s": config.phase_s,
        "window_ms": config.window_ms,
        **phases,
        "lend_check_ns": cost["median"],
        "lend_check_cases": cost["cases"],
    }
