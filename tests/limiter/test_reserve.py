"""The driver reserve inside the cap: memory the driver holds for a process
beyond the bytes it asked for (the context, its modules), measured through NVML
and counted against the container's cap (docs/LIMITER.md, Driver reserve).

Real processes on the fake driver, whose contexts hold FAKEGPU_CTX_RESERVE_MIB
and whose modules hold FAKEGPU_MODULE_MIB, shown by the fake NVML's
per-process memory."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from arkgpu.limiter import Limits, read_usage
from arkgpu.limiter.containers import FakeContainer
from arkgpu.limiter.region import Usage

from .conftest import MiB, Probe

RESERVE = {"FAKEGPU_CTX_RESERVE_MIB": "16"}


def reserve_of(usage: Usage, probe: Probe) -> int:
    """The reserve the region holds for the probe's process on GPU 0."""
    mine = [p for p in usage.processes if p.pid == probe.proc.pid]
    return mine[0].reserve_bytes[0] if mine else 0


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` s."""
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"{what}: not within {timeout} s"
        time.sleep(0.02)


def test_the_reserve_is_measured_and_an_allocation_that_fits_without_it_is_refused(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A context holding 16 MiB under a 64 MiB cap: after 8 MiB are allocated the
    region shows the 16 MiB reserve; 44 MiB more (52 MiB asked for, under the
    cap) is refused with out of memory, 40 MiB (the cap exactly) is not, and
    cuMemGetInfo counts the reserve as used."""
    box = make_container(Limits((64 * MiB,)))
    probe = probes(box, RESERVE)
    assert probe.ask(f"alloc alloc {8 * MiB}").startswith("ok")
    usage = read_usage(box.region)
    assert reserve_of(usage, probe) == 16 * MiB
    assert usage.reserved_bytes[0] == 16 * MiB
    assert usage.used_bytes[0] == 8 * MiB
    assert usage.held_bytes[0] == 24 * MiB
    assert probe.ask(f"alloc alloc {44 * MiB}") == "oom"
    assert probe.ask(f"alloc alloc {40 * MiB}").startswith("ok")
    free, total = (int(x) for x in probe.ask("info").split())
    assert (free, total) == (0, 64 * MiB)
    assert read_usage(box.region).degraded["reserve_unlisted"] == 0


def test_every_process_s_reserve_counts_and_an_exiting_process_gives_it_back(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """Four processes each holding a 16 MiB context under a 64 MiB cap: three
    allocate 1 MiB each (51 MiB held), the fourth's 1 MiB is refused (68 MiB);
    when one of the three is killed its reserve and bytes come back (reaper,
    within 2 s) and the fourth's allocation goes through."""
    box = make_container(Limits((64 * MiB,)))
    procs = [probes(box, RESERVE) for _ in range(4)]
    for probe in procs[:3]:
        assert probe.ask(f"alloc alloc {1 * MiB}").startswith("ok")
    assert read_usage(box.region).reserved_bytes[0] == 48 * MiB
    assert procs[3].ask(f"alloc alloc {1 * MiB}") == "oom"
    procs[0].proc.kill()
    procs[0].proc.wait(timeout=10)
    wait_for(
        lambda: read_usage(box.region).reserved_bytes[0] <= 48 * MiB,
        2.0,
        "the killed process's reserve given back",
    )
    assert procs[3].ask(f"alloc alloc {1 * MiB}").startswith("ok")
    usage = read_usage(box.region)
    assert usage.reserved_bytes[0] == 48 * MiB  # processes 1, 2 and 3
    assert usage.used_bytes[0] == 3 * MiB
    assert usage.used_bytes[0] + usage.reserved_bytes[0] <= 64 * MiB


def test_a_module_loaded_later_is_counted_within_the_refresh_period(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A module of 8 MiB loaded after the first allocation: with a 200 ms period
    the region shows the larger reserve within 2 s; with the periodic refresh
    off (period 0), an allocation that comes within the margin of the cap
    measures it first and is refused."""
    env = {**RESERVE, "FAKEGPU_MODULE_MIB": "8"}  # cubench loads one module at start
    periodic = make_container(Limits((256 * MiB,), reserve_period_ms=200))
    probe = probes(periodic, env)
    assert probe.ask(f"alloc alloc {1 * MiB}").startswith("ok")
    assert reserve_of(read_usage(periodic.region), probe) == 24 * MiB
    assert probe.ask("module") == "ok"
    wait_for(lambda: reserve_of(read_usage(periodic.region), probe) == 32 * MiB, 2.0, "refresh")

    manual = make_container(Limits((64 * MiB,), reserve_period_ms=0, reserve_margin_mib=16))
    probe = probes(manual, env)
    assert probe.ask(f"alloc alloc {1 * MiB}").startswith("ok")
    assert probe.ask("module") == "ok"
    time.sleep(0.5)
    assert reserve_of(read_usage(manual.region), probe) == 24 * MiB  # no refresh: period 0
    # 1 + 24 + 34 = 59 MiB fits the stale figure; with the module's 8 MiB it is 67.
    assert probe.ask(f"alloc alloc {34 * MiB}") == "oom"
    assert reserve_of(read_usage(manual.region), probe) == 32 * MiB


def test_no_region_lock_is_held_while_nvml_is_slow(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe], workdir: Path
) -> None:
    """One process whose NVML call takes 3 s (measuring its reserve before its
    first allocation): while it is inside that call another process of the
    container allocates at once, and both allocations succeed."""
    box = make_container(Limits((256 * MiB,)))
    (workdir / "marks").mkdir()
    (workdir / "marks").chmod(0o777)  # the container user (nobody under root) writes there
    mark = workdir / "marks" / "in-nvml"
    slow_env = {**RESERVE, "FAKEGPU_NVML_DELAY_MS": "3000", "FAKEGPU_NVML_DELAY_MARK": str(mark)}
    slow = probes(box, slow_env)
    fast = probes(box, RESERVE)
    assert fast.ask("info").split()[0].isdigit()  # attached and ready
    slow.send(f"alloc alloc {1 * MiB}")
    wait_for(mark.exists, 10.0, "the slow process inside NVML")
    start = time.monotonic()
    assert fast.ask(f"alloc alloc {1 * MiB}", timeout=10.0).startswith("ok")
    took = time.monotonic() - start
    assert took < 1.5, f"an allocation waited {took:.2f} s while another process was in NVML"
    assert slow.reply(timeout=15.0).startswith("ok")
    assert read_usage(box.region).reserved_bytes[0] == 32 * MiB


def test_without_nvml_or_unlisted_the_reserve_is_zero_and_counted(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """NVML failing (no driver) or listing other pids (a container's own pid
    namespace): the process's reserve is 0, the allocation is judged on its
    requested bytes as before, and each case is counted once per process."""
    box = make_container(Limits((64 * MiB,)))
    broken = probes(box, {**RESERVE, "FAKEGPU_NVML_BROKEN": "1"})
    elsewhere = probes(box, {**RESERVE, "FAKEGPU_NVML_PID_OFFSET": "4000000"})
    for probe in (broken, elsewhere):
        assert probe.ask(f"alloc alloc {30 * MiB}").startswith("ok")
        assert probe.ask(f"alloc alloc {1 * MiB}").startswith("ok")
    usage = read_usage(box.region)
    assert usage.reserved_bytes[0] == 0
    assert usage.used_bytes[0] == 62 * MiB
    assert usage.degraded["reserve_no_nvml"] == 1
    assert usage.degraded["reserve_unlisted"] == 1


def test_the_reserve_is_per_device(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """Two GPUs: the context's reserve counts on its own GPU; memory made on the
    other GPU (cuMemCreate) brings the driver's holding there, which NVML lists
    only once the allocation exists: it is counted by the next periodic
    measurement, and the first, unlisted one is not counted as a pid mismatch."""
    box = make_container(Limits((64 * MiB, 64 * MiB), reserve_period_ms=200))
    probe = probes(box, {**RESERVE, "FAKEGPU_DEVICES": "2"})
    assert probe.ask(f"alloc alloc {1 * MiB}").startswith("ok")
    assert probe.ask(f"alloc vmm1 {1 * MiB}").startswith("ok")
    usage = read_usage(box.region)
    assert usage.reserved_bytes[:2] == (16 * MiB, 0)
    wait_for(lambda: read_usage(box.region).reserved_bytes[1] == 16 * MiB, 2.0, "GPU 1's reserve")
    usage = read_usage(box.region)
    assert usage.used_bytes[:2] == (1 * MiB, 1 * MiB)
    assert usage.degraded["reserve_unlisted"] == 0
