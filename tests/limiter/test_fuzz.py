"""Random sequences, from three processes of one container, of allocations,
frees, launches, forks, new threads with their own streams and node-side
region updates (cap and share): the region's count always equals the live
allocations, no allocation is let past the cap in force, no process crashes
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
    """What the region must say: each process's live allocations, the cap in force."""

    cap: int
    share_bp: int = 10_000
    live: list[list[tuple[str, int]]] = field(default_factory=lambda: [[], [], []])

    @property
    def total(self) -> int:
        """Bytes of all live allocations."""
        return sum(b for mine in self.live for _, b in mine)

    def allocated(self, who: int, reply: str, size: int) -> None:
        """Check an allocation's reply against the cap and record it."""
        words = reply.split()
        if words[0] == "ok":
            assert self.total + size <= self.cap, f"{reply} past the cap {self.cap}"
            self.live[who].append((words[1], size))
        else:
            assert words == ["oom"], reply
            assert self.total + size > self.cap, f"refused under the cap: {self.total}+{size}"


def wait_for_count(box: FakeContainer, want: int, timeout: float = 5.0) -> None:
    """The region's count reaches ``want`` (a forked child's bytes are
    reclaimed by a reaper within ~200 ms of its exit)."""
    end = time.monotonic() + timeout
    while read_usage(box.region).used_bytes[0] != want:
        assert time.monotonic() < end, f"count {read_usage(box.region).used_bytes[0]} != {want}"
        time.sleep(0.02)


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
        expect = "child ok" if model.total + n <= model.cap else "child oom"
        assert lines[0] == expect, lines
        assert lines[1].startswith("forked")
        wait_for_count(box, model.total)
    elif kind in ("cap", "share"):
        model.cap, model.share_bp = (n * MiB, model.share_bp) if kind == "cap" else (model.cap, n)
        box.set_limits(Limits((model.cap,), model.share_bp))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OP, min_size=5, max_size=25))
def test_random_operations_from_three_processes_keep_the_count_exact(
    ops: list[tuple[str, int, int]],
) -> None:
    """After every operation the region counts exactly the live allocations
    (total and per process) and every process still answers."""
    root = Path(tempfile.mkdtemp(prefix="arkgpu-fuzz-"))
    make_world_readable(root)
    model = Model(cap=6 * MiB)
    box = FakeContainer.create(root / "c", root / "fakegpu", Limits((model.cap,)))
    procs = [Probe(box) for _ in range(3)]
    try:
        for probe in procs:  # attached: their reapers take a dead child's bytes back
            assert probe.ask("info").split()[0].isdigit()
        for op in ops:
            step(box, procs, model, op)
            usage = read_usage(box.region)
            assert usage.used_bytes[0] == model.total, op
            by_pid = {p.pid: p.total_bytes for p in usage.processes}
            for probe, mine in zip(procs, model.live, strict=True):
                assert by_pid.get(probe.proc.pid, 0) == sum(b for _, b in mine)
        for probe in procs:
            assert probe.ask("info").split()[0].isdigit()  # alive and answering
        assert read_usage(box.region).degraded["lock_errors"] == 0
    finally:
        for probe in procs:
            probe.close()
        shutil.rmtree(root, ignore_errors=True)
