"""The fake GPU itself: asynchronous launches, events at device times, and one
device shared in time by the processes of all containers."""

from __future__ import annotations

from collections.abc import Callable

from arkgpu.limiter import Limits
from arkgpu.limiter.benchmarking import finish_load, start_load
from arkgpu.limiter.containers import FakeContainer

from .conftest import Probe


def test_launches_are_asynchronous_and_events_time_the_kernel(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A 200 ms kernel's launch returns at once; its end event is not ready
    right after; the events around it measure 200 ms of device time."""
    probe = probes(make_container(Limits((None,))))
    returned_us, ready, elapsed_us = probe.ask("async 200000").split()
    assert int(returned_us) < 100_000
    assert ready == "notready"
    assert abs(int(elapsed_us) - 200_000) < 1_000


def test_processes_share_the_device_in_time(make_container: Callable[..., FakeContainer]) -> None:
    """Two unpaced containers launching back to back get about half the
    device each, and together never more than all of it. Shares are taken
    over the window both were launching in: on a loaded machine one process
    may start or stop well before the other and have the device alone."""
    loads = [start_load(make_container(Limits((None,))), 1.2, 1000) for _ in range(2)]
    results = [finish_load(p) for p in loads]
    start = max(r.t_ns[0] for r in results)
    end = min(r.t_ns[-1] for r in results)
    assert end - start > 300_000_000
    shares = [r.window_share(start, end) for r in results]
    assert sum(shares) < 1.03
    assert all(0.25 < s < 0.75 for s in shares)
