"""Random sequences, from three processes of one container, of allocations,
frees, launches, forks, new threads with their own streams and node-side
region updates (cap and share), each process's context holding a driver
reserve (1 MiB, the fake NVML shows it): the region's count always equals the
live allocations and its reserve the live processes' reserves, no allocation
is let past the cap in force (allocations plus reserves), no process crashes
(and, under ARKGPU_LIMITER_BUILD=asan, no sanitizer reports: conftest)."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arkgpu.limiter import Limits, read_usage
from arkgpu.limiter.containers import FakeContainer, make_world_readable

from .conftest import MiB, Probe

KiB = 1 << 10
RESERVE_MIB = 1

OP = st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 2), st.integers(1, 3 * MiB)),
    st.tuples(st.just("free"), st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("launch"), st.integers(0, 2), st.integers(1, 300)),
    st.tuples(st.just("thread"), st.integers(0, 2), st.integers(1, 2 * MiB)),
    st.tuples(st.just("fork"), st.integers(0, 2), st.integers(1, 2 * MiB)),
    st.tuples(st.just("cap"), st.just(0), st.integers(2, 8)),
    st.tuples(st.just("share"), st.just(0), st.integers(1_000, 10_000)),
)


@dataclass
class Model:
    """What the region must say: each process's live allocations and whether
    its reserve is counted (from its first allocation on), the cap in force."""

    cap: int
    share_bp: int = 10_000
    live: list[list[tuple[str, int]]] = field(default_factory=lambda: [[], [], []])
    measured: set[int] = field(default_factory=set)

    @property
    def total(self) -> int:
        """Bytes of all live allocations."""
        return sum(b for mine in self.live for _, b in mine)

    @property
    def reserved(self) -> int:
        """Driver reserve of the processes that have measured theirs."""
        return len(self.measured) * RESERVE_MIB * MiB

    def allocated(self, who: int, reply: str, size: int) -> None:
        """Check an allocation's reply against the cap and record it."""
        self.measured.add(who)  # measured before the first allocation is judged
        held = self.total + self.reserved
        words = reply.split()
        if words[0] == "ok":
            assert held + size <= self.cap, f"{reply} past the cap {self.cap}"
            self.live[who].append((words[1], size))
        else:
            assert words == ["oom"], reply
            assert held + size > self.cap, f"refused under the cap: {held}+{size}"


def wait_for_count(box: FakeContainer, model: Model, timeout: float = 5.0) -> None:
    """The region's count and reserve reach the model's (a forked child's bytes
    and reserve are reclaimed by a reaper within ~200 ms of its exit)."""
    end = time.monotonic() + timeout
    want = (model.total, model.reserved)
    while (got := _held(box)) != want:
        assert time.monotonic() < end, f"count and reserve {got} != {want}"
        time.sleep(0.02)


def _held(box: FakeContainer) -> tuple[int, int]:
    usage = read_usage(box.region)
    return usage.used_bytes[0], usage.reserved_bytes[0]


def step(box: FakeContainer, procs: list[Probe], model: Model, op: tuple[str, int, int]) -> None:
    """Apply one operation to the container and to the model."""
    kind, who, n = op
    probe, mine = procs[who], model.live[who]
    if kind == "alloc":
        model.allocated(who, probe.ask(f"alloc alloc {n}"), n)
    elif kind == "thread":
        model.allocated(who, probe.ask(f"thread {n} 50"), n)
    elif kind == "free" and mine:
        ident, _ = mine.pop(n % len(mine))
        assert probe.ask(f"free {ident}") == "ok"
    elif kind == "launch":
        assert probe.ask(f"launch kernel {n}") == "ok"
    elif kind == "fork":
        lines = sorted([probe.ask(f"forkalloc {n} 0"), probe.reply()])
        # the child's own context holds a reserve too, for as long as it lives
        held = model.total + model.reserved + RESERVE_MIB * MiB
        expect = "child ok" if held + n <= model.cap else "child oom"
        assert lines[0] == expect, lines
        assert lines[1].startswith("forked")
        wait_for_count(box, model)
    elif kind in ("cap", "share"):
        model.cap, model.share_bp = (n * MiB, model.share_bp) if kind == "cap" else (model.cap, n)
        box.set_limits(Limits((model.cap,), model.share_bp))


def check_region(
    box: FakeContainer, procs: list[Probe], model: Model, op: tuple[str, int, int]
) -> None:
    """The region counts the live allocations and the live processes' reserves,
    in total and per process."""
    usage = read_usage(box.region)
    assert usage.used_bytes[0] == model.total, op
    assert usage.reserved_bytes[0] == model.reserved, op
    by_pid = {p.pid: (p.total_bytes, p.reserve_bytes[0]) for p in usage.processes}
    for who, (probe, mine) in enumerate(zip(procs, model.live, strict=True)):
        reserve = RESERVE_MIB * MiB if who in model.measured else 0
        assert by_pid.get(probe.proc.pid, (0, 0)) == (sum(b for _, b in mine), reserve), op


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OP, min_size=5, max_size=25))
def test_random_operations_from_three_processes_keep_the_count_exact(
    ops: list[tuple[str, int, int]],
) -> None:
    """After every operation the region counts exactly the live allocations and
    reserves (total and per process) and every process still answers."""
    root = Path(tempfile.mkdtemp(prefix="arkgpu-fuzz-"))
    make_world_readable(root)
    model = Model(cap=6 * MiB)
    box = FakeContainer.create(root / "c", root / "fakegpu", Limits((model.cap,)))
    procs = [Probe(box, {"FAKEGPU_CTX_RESERVE_MIB": str(RESERVE_MIB)}) for _ in range(3)]
    try:
        for probe in procs:  # attached: their reapers take a dead child's bytes back
            assert probe.ask("info").split()[0].isdigit()
        for op in ops:
            step(box, procs, model, op)
            check_region(box, procs, model, op)
        for probe in procs:
            assert probe.ask("info").split()[0].isdigit()  # alive and answering
        assert read_usage(box.region).degraded["lock_errors"] == 0
    finally:
        for probe in procs:
            probe.close()
        shutil.rmtree(root, ignore_errors=True)
