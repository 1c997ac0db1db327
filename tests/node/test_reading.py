"""The runtime's cheap usage reader says what the limiter's full reader says.

:class:`arkgpu.node.reading.UsageReader` reads the fixed part of the usage
record and only the new latency entries; it must give the same
:class:`~arkgpu.limiter.region.Usage` and samples as
:func:`~arkgpu.limiter.region.read_usage` and
:func:`~arkgpu.limiter.latencies.read_latencies`, and refuse the same bad bytes
with a :class:`~arkgpu.limiter.untrusted.RegionDataError`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.limiter import layout, native
from arkgpu.limiter.containers import FakeContainer
from arkgpu.limiter.latencies import read_latencies
from arkgpu.limiter.region import (
    USAGE_FILE,
    Limits,
    create_region,
    read_usage,
    read_usage_file,
)
from arkgpu.limiter.untrusted import PID_MAX, RegionDataError, start_ticks
from arkgpu.node import reading
from arkgpu.node.reading import UsageReader


def _region(tmp_path: Path) -> Path:
    return create_region(tmp_path / "c", Limits((None,)))


def _rewrite(region: Path, change: Callable[[layout.UsageStruct], None]) -> None:
    path = region / USAGE_FILE
    u = read_usage_file(path)
    change(u)
    with path.open("r+b") as f:
        f.write(bytes(u))


def _busy(u: layout.UsageStruct, head: int = 1500) -> None:
    """Counters, two process slots (this process, alive; a gone one), a wrapped ring."""
    u.used[0], u.busy_ns[1], u.reclaimed_bytes, u.lock_recoveries = 5 << 20, 77, 3, 1
    u.queue_waits, u.slot_refusals = 4, 2
    u.inflight.count, u.inflight.since_ns, u.inflight.changed_ns, u.inflight.begun = 1, 9, 11, 5
    me = u.procs[3]
    me.pid, me.start_ticks, me.busy_ns, me.flags = os.getpid(), start_ticks(os.getpid()), 8, 1
    me.bytes[0][0], me.bytes[1][2] = 1 << 30, 4096
    gone = u.procs[9]
    gone.pid, gone.start_ticks, gone.launches, gone.throttled_ns = PID_MAX - 1, 1, 6, 7
    u.lat_head = head
    for ticket in range(head - layout.LATENCY_SLOTS, head):
        e = u.lat[ticket % layout.LATENCY_SLOTS]
        e.seq, e.t_ns, e.latency_ns, e.batch = ticket + 1, ticket, 1000 + ticket, 1 + ticket % 4
    u.lat[(head - 5) % layout.LATENCY_SLOTS].seq = 0  # being written


def test_reads_what_the_full_reader_reads(tmp_path: Path) -> None:
    """Counters, live and gone processes (alive judged from /proc), the in-flight
    record: one Usage, equal to read_usage's."""
    region = _region(tmp_path)
    reader = UsageReader(region / USAGE_FILE)
    assert reader.read() == read_usage(region)  # a fresh region
    _rewrite(region, _busy)
    usage = reader.read()
    assert usage == read_usage(region)
    assert [p.alive for p in usage.processes] == [True, False]
    assert usage.processes[0].bytes_by_kind["alloc"][0] == 1 << 30
    assert usage.degraded["queue_waits"] == 4


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1600), st.integers(1, 1600))
def test_new_latencies_are_the_full_readers(after: int, head: int) -> None:
    """Samples after any sequence number, the ring wrapped or not, overwritten entries
    gone and an entry being written skipped: the same list as read_latencies."""
    import tempfile  # noqa: PLC0415 (hypothesis runs the body many times; one folder each)

    with tempfile.TemporaryDirectory() as tmp:
        region = _region(Path(tmp))
        _rewrite(region, lambda u: _busy(u, head))
        reader = UsageReader(region / USAGE_FILE)
        assert reader.read().latency_head == head
        assert reader.latencies(head, after) == read_latencies(region, after)


def _bad_proc_1_bytes(u: layout.UsageStruct) -> None:
    u.procs[1].pid = 5
    u.procs[1].bytes[0][0] = (1 << 64) - 1
    u.procs[1].bytes[3][5] = 1


def _bad_proc_3_bytes_and_reserve(u: layout.UsageStruct) -> None:
    u.procs[3].pid = 7
    u.procs[3].bytes[0][0] = 1 << 63
    u.procs[3].reserve[2] = 1 << 63


def _bad_used_and_reserved(u: layout.UsageStruct) -> None:
    u.used[0] = 1 << 63
    u.reserved[1] = 1 << 63


BAD: dict[str, Callable[[layout.UsageStruct], None]] = {
    "magic": lambda u: setattr(u, "magic", 1),
    "version": lambda u: setattr(u, "version", layout.LAYOUT_VERSION + 1),
    "size": lambda u: setattr(u, "size", 12),
    "inflight.since_ns": lambda u: setattr(u.inflight, "since_ns", -1),
    "inflight.changed_ns": lambda u: setattr(u.inflight, "changed_ns", -5),
    "procs[2].pid": lambda u: setattr(u.procs[2], "pid", -3),
    "procs[4].pid": lambda u: setattr(u.procs[4], "pid", PID_MAX),
    "procs[1].bytes": _bad_proc_1_bytes,
    "procs[3].bytes and reserve": _bad_proc_3_bytes_and_reserve,
    "used and reserved": _bad_used_and_reserved,
}


@pytest.mark.parametrize("field", BAD)
def test_refuses_what_the_full_reader_refuses(tmp_path: Path, field: str) -> None:
    """A field no library writes: RegionDataError from both readers, naming it."""
    region = _region(tmp_path)
    _rewrite(region, BAD[field])
    with pytest.raises(RegionDataError):
        read_usage(region)
    with pytest.raises(RegionDataError) as caught:
        UsageReader(region / USAGE_FILE).read()
    assert str(region / USAGE_FILE) in str(caught.value)
    if "[" in field or "." in field:
        assert field in str(caught.value)


def test_follows_a_replaced_file_and_refuses_a_short_or_strange_one(tmp_path: Path) -> None:
    """The reader keeps its file open, but reads the new one when the path is replaced;
    a truncated file or a FIFO in its place is refused, never read."""
    region = _region(tmp_path)
    path = region / USAGE_FILE
    reader = UsageReader(path)
    before = reader.read()
    new = tmp_path / "new"
    new.write_bytes(path.read_bytes())
    os.replace(new, path)
    _rewrite(region, _busy)
    assert reader.read() == read_usage(region) != before
    os.truncate(path, 100)
    with pytest.raises(RegionDataError, match="bytes"):
        reader.read()
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(RegionDataError, match="not a regular file"):
        reader.read()
    reader.close()


def test_the_liveness_lock_is_held_while_a_library_process_runs(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process under the library holds its usage file's liveness lock from its first CUDA
    call until it exits, and the reader sees it without taking it: what tells the chart's
    node runtime, in a pid namespace of its own, that a container's process is alive."""
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(shared_dir / "native"))
    box = FakeContainer.create(shared_dir / "c", shared_dir / "fakegpu", Limits((None,)))
    reader = UsageReader(box.region / USAGE_FILE)
    assert not reader.in_use()
    probe = box.popen([str(native.cubench()), "script"])
    assert probe.stdin is not None
    assert probe.stdout is not None
    probe.stdin.write("info\n")
    probe.stdin.flush()
    assert probe.stdout.readline().strip()
    assert reader.in_use()
    assert reader.in_use()  # asking takes no lock
    probe.communicate(timeout=60)  # end of input: it exits
    assert probe.returncode == 0
    assert not reader.in_use()
    reader.close()


class _Clock:
    """A stand-in for the reader's ``time`` module: ``monotonic`` is what the test sets."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def test_the_slots_are_parsed_again_after_the_reread_time_or_when_their_pids_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process slots parsed once stand for SLOTS_REREAD_S while their pids stay the same:
    a process that ends holding its slot is reported alive until then and gone after; a
    process that attaches meanwhile is seen at once (the slots parsed again, /proc asked
    again); a new reader and the full reader see the ended one gone at once."""
    clock = _Clock()
    monkeypatch.setattr(reading, "time", clock)
    region = _region(tmp_path)
    child = subprocess.Popen(["sleep", "60"])

    def slot(u: layout.UsageStruct, i: int, pid: int) -> None:
        u.procs[i].pid, u.procs[i].start_ticks = pid, start_ticks(pid)

    _rewrite(region, lambda u: slot(u, 2, child.pid))
    reader = UsageReader(region / USAGE_FILE)
    assert [p.alive for p in reader.read().processes] == [True]
    child.kill()
    child.wait()
    clock.now += 0.5 * reading.SLOTS_REREAD_S
    assert [p.alive for p in reader.read().processes] == [True]
    assert [p.alive for p in UsageReader(region / USAGE_FILE).read().processes] == [False]
    assert [p.alive for p in read_usage(region).processes] == [False]
    _rewrite(region, lambda u: slot(u, 5, os.getpid()))
    seen = reader.read().processes
    assert [(p.pid, p.alive) for p in seen] == [(child.pid, False), (os.getpid(), True)]
    _rewrite(region, lambda u: setattr(u.procs[5], "busy_ns", 99))  # the same pids: reused
    clock.now += 0.9 * reading.SLOTS_REREAD_S
    assert [p.busy_ns for p in reader.read().processes] == [0, 0]
    clock.now += 0.2 * reading.SLOTS_REREAD_S
    assert [p.busy_ns for p in reader.read().processes] == [0, 99]
    assert reader.read() == read_usage(region)
    reader.close()
