"""Idle-share lending on the fake GPU: a best-effort (BE) container borrows a
latency-critical (LC) container's share only while the LC has no batch in
flight, a stale in-flight count is ignored, a missing or foreign lender file
lends nothing, and the in-flight counter never goes below zero.

Busy shares are measured on the fake GPU's time (``arkgpu-cubench load``
samples); bounds are generous for a loaded 2-core machine."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from arkgpu.client import LatencyReporter
from arkgpu.limiter import (
    Limits,
    create_region,
    layout,
    lender_usage,
    link_lender,
    native,
    read_latencies,
    read_limits,
    read_usage,
    write_limits,
)
from arkgpu.limiter.benchmarking import LoadResult, finish_load, start_load
from arkgpu.limiter.containers import FakeContainer

MS = 1_000_000


@pytest.fixture
def lc(make_container: Callable[..., FakeContainer]) -> FakeContainer:
    """An LC container (full share: it paces nothing itself)."""
    return make_container(Limits((None,)))


@pytest.fixture
def reporter(lc: FakeContainer) -> Iterator[LatencyReporter]:
    """The LC server's client, in this test process."""
    with LatencyReporter(lc.region) as r:
        yield r


def _borrower(
    make_container: Callable[..., FakeContainer], lc: FakeContainer, **lending: object
) -> FakeContainer:
    """A BE container at 30% that borrows 50% from ``lc`` as lender 0."""
    be = make_container(Limits((None,), 3_000, lent_bp=(5000,), **lending))  # type: ignore[arg-type]
    link_lender(be.region, 0, lc.region)
    return be


def _tail_share(result: LoadResult, after_ns: int) -> float:
    """Busy share from ``after_ns`` to the run's last launch."""
    return result.window_share(after_ns, result.t_ns[-1])


def test_be_borrows_the_lc_share_only_while_no_lc_batch_is_in_flight(
    make_container: Callable[..., FakeContainer],
    lc: FakeContainer,
    reporter: LatencyReporter,
) -> None:
    """A BE container at 30% with a lender lending 50%: while the LC holds a
    batch in flight the BE stays near 30%; once the batch ends (the LC is idle)
    the BE runs near 80%."""
    be = _borrower(make_container, lc)
    assert reporter.batch_begin() == 1
    proc = start_load(be, 2.6, 1000)
    time.sleep(1.3)
    ended = time.monotonic_ns()
    assert reporter.batch_end() == 0
    result = finish_load(proc)
    in_flight = result.window_share(result.t_ns[0] + 300 * MS, ended - 50 * MS)
    idle = _tail_share(result, ended + 250 * MS)
    assert 0.1 < in_flight <= 0.45
    assert idle >= 0.6


def test_a_stale_in_flight_count_is_ignored(
    make_container: Callable[..., FakeContainer],
    lc: FakeContainer,
    reporter: LatencyReporter,
) -> None:
    """An LC batch begun and never ended (a crashed server) stops blocking the
    loan once the count has been unchanged for the staleness limit (200 ms)."""
    be = _borrower(make_container, lc, lend_stale_ms=200)
    reporter.batch_begin()
    begun = time.monotonic_ns()
    result = finish_load(start_load(be, 1.5, 1000))
    assert read_usage(lc.region).batches_in_flight == 1
    assert _tail_share(result, begun + 500 * MS) >= 0.6


def _write_foreign_lenders(be: FakeContainer, lc: FakeContainer) -> None:
    """lenders/0 missing, 1 a usage file of layout 1, 2 a truncated usage
    file, 3 a directory: each with an in-flight count of 0."""
    lenders = be.region / "lenders"
    lenders.mkdir(mode=0o755)
    old = bytearray((lc.region / "usage").read_bytes())
    old[8:12] = (1).to_bytes(4, "little")
    (lenders / "1").write_bytes(bytes(old))
    (lenders / "2").write_bytes((lc.region / "usage").read_bytes()[:4096])
    (lenders / "3").mkdir()
    for path in lenders.iterdir():
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_missing_or_foreign_lender_files_lend_nothing(
    make_container: Callable[..., FakeContainer], lc: FakeContainer
) -> None:
    """A BE container at 30% whose four lenders' files are missing, of another
    layout version, truncated or not a file runs at its own share, with no
    error and no refusal (every launch succeeds), and says nothing on stderr."""
    be = make_container(Limits((None,), 3_000, lent_bp=(5000,) * 4))
    _write_foreign_lenders(be, lc)
    assert all(lender_usage(be.region, k) is None for k in range(4))
    out, err = start_load(be, 1.2, 1000).communicate(timeout=120)
    report = json.loads(out)
    assert report["error"] == 0
    assert 0.12 < report["share"] <= 0.45
    assert err == ""


def test_a_lender_linked_at_run_time_is_seen(
    make_container: Callable[..., FakeContainer], lc: FakeContainer
) -> None:
    """Lending switched on while the BE container runs (limits written, then
    lenders/0 linked) raises its share within about a second."""
    be = make_container(Limits((None,), 3_000))
    proc = start_load(be, 3.0, 1000)
    time.sleep(0.8)
    changed = time.monotonic_ns()
    write_limits(be.region, Limits((None,), 3_000, lent_bp=(5000,)))
    link_lender(be.region, 0, lc.region)
    result = finish_load(proc)
    assert result.window_share(result.t_ns[0] + 200 * MS, changed - 50 * MS) <= 0.45
    assert _tail_share(result, changed + 1300 * MS) >= 0.6


def test_batch_end_never_goes_below_zero(reporter: LatencyReporter, lc: FakeContainer) -> None:
    """Ends without begins leave the count at 0; begins and ends move it by
    one; the usage region shows the count, the batches begun and the times."""
    assert reporter.batch_end() == 0
    before = time.monotonic_ns()
    assert [reporter.batch_begin(), reporter.batch_begin()] == [1, 2]
    assert [reporter.batch_end() for _ in range(3)] == [1, 0, 0]
    usage = read_usage(lc.region)
    assert (usage.batches_in_flight, usage.batches_begun) == (0, 2)
    assert before <= usage.in_flight_since_ns <= usage.in_flight_changed_ns <= time.monotonic_ns()


def test_the_batch_context_marks_the_batch_and_reports_its_latency(
    reporter: LatencyReporter, lc: FakeContainer
) -> None:
    """``with reporter.batch(8)`` holds one batch in flight for its body and
    then reports the body's latency for 8 requests; a failing body ends the
    batch and reports nothing."""
    with reporter.batch(8):
        assert read_usage(lc.region).batches_in_flight == 1
        time.sleep(0.02)
    assert reporter.batches_in_flight() == 0
    (sample,) = read_latencies(lc.region)
    assert sample.batch == 8
    assert 20 * MS <= sample.latency_ns < 2000 * MS
    with pytest.raises(RuntimeError), reporter.batch(4):
        raise RuntimeError("the batch failed")
    assert reporter.batches_in_flight() == 0
    assert len(read_latencies(lc.region)) == 1


def test_the_c_client_counts_batches(tmp_path: Path) -> None:
    """The C functions of libarkgpu_client.so, called directly."""
    region = create_region(tmp_path / "r", Limits((None,)))
    lib = ctypes.CDLL(str(native.client_library()))
    lib.arkgpu_client_open.restype = ctypes.c_void_p
    lib.arkgpu_client_open.argtypes = [ctypes.c_char_p]
    for name in ("batch_begin", "batch_end", "batches_in_flight"):
        getattr(lib, f"arkgpu_client_{name}").restype = ctypes.c_uint64
        getattr(lib, f"arkgpu_client_{name}").argtypes = [ctypes.c_void_p]
    lib.arkgpu_client_close.argtypes = [ctypes.c_void_p]
    handle = lib.arkgpu_client_open(os.fsencode(region))
    assert handle
    try:
        assert lib.arkgpu_client_batch_end(handle) == 0
        assert lib.arkgpu_client_batch_begin(handle) == 1
        assert lib.arkgpu_client_batches_in_flight(handle) == 1
        assert lib.arkgpu_client_batch_end(handle) == 0
        assert lib.arkgpu_client_batch_end(handle) == 0
    finally:
        lib.arkgpu_client_close(handle)
    assert read_usage(region).batches_begun == 1


PAIRS = """
import sys
from pathlib import Path
from arkgpu.client import LatencyReporter
with LatencyReporter(Path(sys.argv[1])) as r:
    for _ in range(int(sys.argv[2])):
        r.batch_begin()
        r.batch_end()
        r.batch_end()
"""


def test_concurrent_begins_and_ends_from_processes_balance(tmp_path: Path) -> None:
    """Three processes each begin 3000 batches and end every one twice, at the
    same time: every begin counts and the count ends at exactly 0."""
    region = create_region(tmp_path / "r", Limits((None,)))
    writers = [
        subprocess.Popen([sys.executable, "-c", PAIRS, str(region), "3000"]) for _ in range(3)
    ]
    assert all(p.wait(timeout=120) == 0 for p in writers)
    usage = read_usage(region)
    assert (usage.batches_in_flight, usage.batches_begun) == (0, 9000)


def test_lending_limits_round_trip(tmp_path: Path) -> None:
    """Lent shares and the staleness limit are written and read back."""
    limits = Limits((None,), 3_000, lent_bp=(5000, 0, 2500), lend_stale_ms=750)
    region = create_region(tmp_path / "r", limits)
    assert read_limits(region) == limits
    write_limits(region, Limits((None,), 3_000))
    assert read_limits(region).lent_bp == ()
    assert read_limits(region).lend_stale_ms == layout.LEND_STALE_MS


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lent_bp": (5000, 10001)}, r"lent_bp\[1\] must be an integer within 0\.\.10000"),
        ({"lent_bp": (-1,)}, r"lent_bp\[0\]"),
        ({"lent_bp": (0.5,)}, r"lent_bp\[0\]"),
        ({"lent_bp": (1,) * 9}, "lent_bp: at most 8 lenders"),
        ({"lend_stale_ms": 0}, "lend_stale_ms"),
        ({"lend_stale_ms": 2**32}, "lend_stale_ms"),
    ],
)
def test_bad_lending_limits_name_the_field(kwargs: dict[str, object], message: str) -> None:
    """Out-of-range lending limits raise ValueError naming the field."""
    with pytest.raises(ValueError, match=message):
        Limits((None,), 3_000, **kwargs)  # type: ignore[arg-type]


def test_a_lender_index_out_of_range_is_refused(tmp_path: Path) -> None:
    """Only lenders/0..7 exist."""
    with pytest.raises(ValueError, match="lender index k"):
        link_lender(tmp_path, layout.MAX_LENDERS, tmp_path)
