"""The node side reads what a container writes (its usage file: memory
counts, busy time, latency reports, batches in flight) as untrusted: any
bytes give figures that make sense or a RegionDataError naming the file and
the field, never another exception or a negative figure."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arkgpu.limiter import Limits, create_region, layout, lender_usage, read_latencies
from arkgpu.limiter import read_usage as read_usage_of
from arkgpu.limiter.lending import lends_now, link_lender
from arkgpu.limiter.region import USAGE_FILE, Usage
from arkgpu.limiter.untrusted import RegionDataError

SIZE = ctypes.sizeof(layout.UsageStruct)
HEADER = layout.UsageStruct.lock.offset


def valid_header() -> bytes:
    """The 16 header bytes of a usage file of this layout."""
    u = layout.UsageStruct()
    u.magic, u.version, u.size = layout.USAGE_MAGIC, layout.LAYOUT_VERSION, SIZE
    return bytes(u)[:16]


def check_figures(usage: Usage) -> None:
    """Every figure the node side got is a non-negative integer."""
    figures = [*usage.used_bytes, *usage.busy_ns, usage.reclaimed_bytes, usage.lock_recoveries]
    figures += [*usage.reserved_bytes]
    figures += [usage.latency_head, usage.batches_in_flight, usage.batches_begun]
    figures += [usage.in_flight_since_ns, usage.in_flight_changed_ns, *usage.degraded.values()]
    for p in usage.processes:
        figures += [p.pid, p.busy_ns, p.launches, p.throttled_ns, p.oom_refusals, p.total_bytes]
        figures += [*p.reserve_bytes, p.held_bytes]
        assert p.held_bytes < 1 << 64
    assert all(isinstance(f, int) and f >= 0 for f in figures)
    assert sum(usage.used_bytes) + sum(usage.reserved_bytes) < 1 << 64


def read_everything(region: Path) -> None:
    """Every reader of the usage file: figures that make sense or RegionDataError."""
    try:
        check_figures(read_usage_of(region))
        samples = read_latencies(region)
    except RegionDataError as e:
        message = str(e)
    else:
        for sample in samples:
            assert min(sample.seq, sample.t_ns, sample.latency_ns, sample.batch) >= 0
        return
    assert str(region / USAGE_FILE) in message
    assert "\n" not in message


@pytest.fixture(scope="module")
def region() -> Iterator[Path]:
    """A region whose usage file each example overwrites."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-untrusted-"))
    yield create_region(path / "r", Limits((1 << 30,)))
    shutil.rmtree(path, ignore_errors=True)


#: Usage files a container might leave: random bytes of any length, or a
#: valid header followed by random fields (so the field checks are reached).
CONTENTS = st.one_of(
    st.binary(max_size=2 * SIZE),
    st.binary(min_size=SIZE - 16, max_size=SIZE - 16).map(lambda b: valid_header() + b),
    st.lists(st.tuples(st.integers(16, SIZE - 8), st.binary(min_size=1, max_size=8)), max_size=40),
)


def materialise(content: bytes | list[tuple[int, bytes]]) -> bytes:
    """Bytes of a usage file: as given, or a valid empty one with patches applied."""
    if isinstance(content, bytes):
        return content
    data = bytearray(valid_header() + bytes(SIZE - 16))
    for offset, patch in content:
        data[offset : offset + len(patch)] = patch
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=CONTENTS)
def test_any_bytes_in_a_usage_file_give_sense_or_a_clear_rejection(
    region: Path, content: bytes | list[tuple[int, bytes]]
) -> None:
    """read_usage, read_latencies and a borrower's view of a lender accept
    any bytes: sensible figures or one RegionDataError line naming the file."""
    (region / USAGE_FILE).write_bytes(materialise(content))
    read_everything(region)


@settings(max_examples=100, deadline=None)
@given(content=CONTENTS, now=st.integers(0, 2**63 - 1), stale=st.integers(1, 2**32 - 1))
def test_a_lender_file_of_any_bytes_lends_or_not_without_error(
    region: Path, content: bytes | list[tuple[int, bytes]], now: int, stale: int
) -> None:
    """A lender's usage file (another container's) of any bytes: the
    borrower's view is a usage or None, and whether it lends is a bool."""
    lender = region.parent / "lender"
    lender.mkdir(exist_ok=True)
    (lender / USAGE_FILE).write_bytes(materialise(content))
    link_lender(region, 0, lender)
    usage = lender_usage(region, 0)
    if usage is not None:
        check_figures(usage)
    assert lends_now(usage, stale, now) in (True, False)


def test_a_fifo_or_a_huge_file_costs_the_reader_nothing(region: Path) -> None:
    """A usage file replaced by a FIFO is refused at once (no blocking read);
    one grown to 64 MiB is read only as far as its record."""
    path = region / USAGE_FILE
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(RegionDataError, match="not a regular file"):
        read_usage_of(region)
    path.unlink()
    create_region(region, Limits((1 << 30,)))
    with path.open("r+b") as f:
        f.truncate(64 << 20)
    assert read_usage_of(region).processes == ()


U64S = st.lists(st.integers(0, 2**64 - 1), min_size=layout.MAX_DEVICES, max_size=layout.MAX_DEVICES)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slot=st.integers(0, layout.MAX_PROCS - 1),
    pid=st.integers(-(2**31), 2**31 - 1),
    reserve=U64S,
    reserved=U64S,
    used=U64S,
    asked=st.integers(0, 2**64 - 1),
)
def test_any_driver_reserve_a_container_writes_gives_sense_or_a_clear_rejection(
    region: Path,
    slot: int,
    pid: int,
    reserve: list[int],
    reserved: list[int],
    used: list[int],
    asked: int,
) -> None:
    """The driver reserve fields (layout 4: a process slot's reserve per GPU,
    the region's sum per GPU) of any value, beside any pid and bytes: sensible
    figures (no sum past 2**64) or one RegionDataError line naming the file."""
    create_region(region, Limits((1 << 30,)))
    u = layout.UsageStruct.from_buffer_copy((region / USAGE_FILE).read_bytes()[:SIZE])
    u.procs[slot].pid = pid
    u.procs[slot].bytes[0][0] = asked
    for d in range(layout.MAX_DEVICES):
        u.procs[slot].reserve[d], u.reserved[d], u.used[d] = reserve[d], reserved[d], used[d]
    (region / USAGE_FILE).write_bytes(bytes(u))
    read_everything(region)


def test_a_reserve_summing_past_2_64_is_named(region: Path) -> None:
    """A process slot whose reserve and bytes sum past 2**64 is rejected with
    the field named."""
    create_region(region, Limits((1 << 30,)))
    u = layout.UsageStruct.from_buffer_copy((region / USAGE_FILE).read_bytes()[:SIZE])
    u.procs[3].pid = 1234
    u.procs[3].bytes[0][0] = 2**63
    u.procs[3].reserve[1] = 2**63
    (region / USAGE_FILE).write_bytes(bytes(u))
    with pytest.raises(RegionDataError, match=r"procs\[3\]\.reserve and bytes sum past 2\*\*64"):
        read_usage_of(region)


def test_a_negative_in_flight_time_is_named(region: Path) -> None:
    """A negative CLOCK_MONOTONIC stamp in the in-flight counter is rejected
    with the field named."""
    create_region(region, Limits((1 << 30,)))
    u = layout.UsageStruct.from_buffer_copy((region / USAGE_FILE).read_bytes()[:SIZE])
    u.inflight.changed_ns = -5
    (region / USAGE_FILE).write_bytes(bytes(u))
    with pytest.raises(RegionDataError, match=r"inflight\.changed_ns is negative"):
        read_usage_of(region)
