"""Memory: every allocation path is counted per container across its processes
and refused beyond the cap; queries report the cap; dead processes' memory is
reclaimed; a process killed inside the region lock blocks no one."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arkgpu.limiter import Limits, read_usage
from arkgpu.limiter.containers import FakeContainer, make_world_readable

from .conftest import MiB, Probe

#: cubench allocation kind -> the region's kind it is counted under.
PATHS = {
    "alloc": "alloc",
    "pitch": "alloc",
    "managed": "managed",
    "vmm": "vmm",
    "async": "async",
    "async_ptsz": "async",
    "pool": "pool",
    "pool_ptsz": "pool",
    "array": "array",
    "array3d": "array",
    "mipmap": "array",
}


def counted(path: str, size: int) -> int:
    """Bytes a request of ``size`` through cubench's ``path`` occupies (cubench's
    shapes: 512-byte pitch rows, float4 texels, 2x2xW bytes, two 1-D mip levels)."""
    if path == "pitch":
        return -(-size // 512) * 512
    if path == "array":
        return -(-size // 16) * 16
    if path == "array3d":
        return -(-size // 4) * 4
    if path == "mipmap":
        width = (size + 1) // 2 * 2
        return width + width // 2
    return size


def used(container: FakeContainer) -> int:
    """Bytes the region counts on GPU 0."""
    return read_usage(container.region).used_bytes[0]


def test_every_allocation_path_is_counted_and_refused_beyond_the_cap(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """For each path: an allocation under the cap succeeds and is counted under
    its kind; one that would cross the cap gets CUDA_ERROR_OUT_OF_MEMORY; the
    free or release gives the bytes back."""
    box = make_container(Limits((8 * MiB,)))
    probe = probes(box)
    for path, kind in PATHS.items():
        reply = probe.ask(f"alloc {path} {5 * MiB}").split()
        assert reply[0] == "ok", (path, reply)
        bytes_ = int(reply[2])
        (proc,) = read_usage(box.region).processes
        assert proc.bytes_by_kind[kind][0] == bytes_, path
        assert used(box) == bytes_
        assert probe.ask(f"alloc {path} {4 * MiB}") == "oom", path
        assert probe.ask(f"free {reply[1]}") == "ok"
        assert used(box) == 0, path
    assert read_usage(box.region).processes[0].oom_refusals == len(PATHS)


def test_memory_queries_report_the_cap_and_never_go_below_zero(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """cuMemGetInfo, cuDeviceTotalMem and nvmlDeviceGetMemoryInfo (and its _v2,
    with reserved memory 0) report the cap as total and the container's own
    use; when the node lowers the cap below the use, free reads 0 rather than
    wrapping around."""
    box = make_container(Limits((8 * MiB,)))
    probe = probes(box)
    assert probe.ask(f"alloc alloc {3 * MiB}").startswith("ok")
    assert probe.ask("info") == f"{5 * MiB} {8 * MiB}"
    assert probe.ask("devtotal") == f"{8 * MiB}"
    assert probe.ask("nvml") == f"{8 * MiB} {5 * MiB} {3 * MiB}"
    assert probe.ask("nvml2") == f"{8 * MiB} {5 * MiB} {3 * MiB} 0"
    box.set_limits(Limits((2 * MiB,)))
    assert probe.ask("info") == f"0 {2 * MiB}"
    assert probe.ask("nvml") == f"{2 * MiB} 0 {3 * MiB}"
    assert probe.ask("nvml2") == f"{2 * MiB} 0 {3 * MiB} 0"
    assert probe.ask("alloc alloc 1") == "oom"


OPS = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from([*PATHS, "free", "free"]),
        st.integers(1, 3 * MiB),
    ),
    min_size=5,
    max_size=30,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_random_sequences_from_four_processes_keep_the_count_exact(
    ops: list[tuple[int, str, int]],
) -> None:
    """Random allocations and frees on every path from four processes of one
    container: after each step the region's total equals the live allocations,
    each process's per-kind bytes equal its own live allocations, the cap is
    never exceeded, and a refusal happens only when the cap would be crossed."""
    cap = 6 * MiB
    root = Path(tempfile.mkdtemp(prefix="arkgpu-hyp-"))
    make_world_readable(root)
    box = FakeContainer.create(root / "c", root / "fakegpu", Limits((cap,)))
    procs = [Probe(box) for _ in range(4)]
    live: list[list[tuple[str, str, int]]] = [[] for _ in procs]
    try:
        for who, op, size in ops:
            probe, mine = procs[who], live[who]
            total = sum(b for p in live for _, _, b in p)
            if op == "free":
                if mine:
                    ident, _, _ = mine.pop(size % len(mine))
                    assert probe.ask(f"free {ident}") == "ok"
            else:
                reply = probe.ask(f"alloc {op} {size}").split()
                if reply[0] == "ok":
                    assert int(reply[2]) == counted(op, size)
                    mine.append((reply[1], PATHS[op], int(reply[2])))
                    assert total + int(reply[2]) <= cap
                else:
                    assert reply == ["oom"]
                    assert total + counted(op, size) > cap
            usage = read_usage(box.region)
            assert usage.used_bytes[0] == sum(b for p in live for _, _, b in p) <= cap
            by_pid = {p.pid: p for p in usage.processes}
            for probe_, mine_ in zip(procs, live, strict=True):
                if probe_.proc.pid not in by_pid:
                    assert not mine_
                    continue
                for kind in set(PATHS.values()):
                    expect = sum(b for _, k, b in mine_ if k == kind)
                    assert by_pid[probe_.proc.pid].bytes_by_kind[kind][0] == expect
    finally:
        for probe in procs:
            probe.close()
        shutil.rmtree(root, ignore_errors=True)


def wait_until(predicate: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``predicate`` held (polling every 10 ms); fails after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, f"condition not met within {timeout} s"
        time.sleep(0.01)
    return time.monotonic() - start


def test_a_killed_process_memory_is_reclaimed_within_a_second(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """After SIGKILL of a process holding memory, the container's count drops
    to the survivors' within 1 s (reclaimed by a survivor, even before the
    killed process is reaped), and the freed room can be allocated again."""
    box = make_container(Limits((10 * MiB,)))
    victim, survivor = probes(box), probes(box)
    assert victim.ask(f"alloc vmm {6 * MiB}").startswith("ok")
    assert survivor.ask(f"alloc alloc {3 * MiB}").startswith("ok")
    assert used(box) == 9 * MiB
    assert all(p.alive for p in read_usage(box.region).processes)
    os.kill(victim.proc.pid, signal.SIGKILL)
    wait_until(lambda: used(box) == 3 * MiB, timeout=1.0)
    assert read_usage(box.region).reclaimed_bytes == 6 * MiB
    assert survivor.ask(f"alloc async {7 * MiB}").startswith("ok")


def test_a_process_killed_while_holding_the_lock_blocks_no_one(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A process SIGKILLed inside the region lock: the others' next allocation
    completes at once (robust mutex: the lock is recovered, the totals
    recounted) instead of hanging."""
    box = make_container(Limits((10 * MiB,)))
    holder, other = probes(box), probes(box)
    assert other.ask(f"alloc alloc {2 * MiB}").startswith("ok")
    assert holder.ask(f"alloc alloc {4 * MiB}").startswith("ok")
    assert holder.ask("hold 60000") == "holding"
    time.sleep(0.3)
    os.kill(holder.proc.pid, signal.SIGKILL)
    assert other.ask(f"alloc alloc {7 * MiB}", timeout=5.0).startswith("ok")
    usage = read_usage(box.region)
    assert usage.lock_recoveries == 1
    assert usage.used_bytes[0] == 9 * MiB


def test_memory_of_a_process_that_exited_is_reclaimed_by_the_next_one(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A process that exits holding memory with no other process left stays
    in the region marked not alive; the next process of the container takes
    its bytes back when it attaches."""
    box = make_container(Limits((4 * MiB,)))
    first = probes(box)
    assert first.ask(f"alloc managed {3 * MiB}").startswith("ok")
    first.close()
    (gone,) = read_usage(box.region).processes
    assert not gone.alive
    assert gone.total_bytes == 3 * MiB
    second = probes(box)
    assert second.ask(f"alloc managed {4 * MiB}").startswith("ok")
    assert read_usage(box.region).reclaimed_bytes == 3 * MiB


def test_caps_are_per_gpu(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """On a two-GPU container each GPU has its own cap and its own count: a
    cuMemCreate on GPU 1 is held to GPU 1's cap whatever GPU 0 has left."""
    box = make_container(Limits((4 * MiB, 1 * MiB)))
    probe = probes(box, {"FAKEGPU_DEVICES": "2"})
    assert probe.ask(f"alloc vmm1 {2 * MiB}") == "oom"
    assert probe.ask(f"alloc vmm1 {1 * MiB}").startswith("ok")
    assert probe.ask(f"alloc vmm {3 * MiB}").startswith("ok")
    assert read_usage(box.region).used_bytes[:2] == (3 * MiB, 1 * MiB)


def test_a_forked_child_is_counted_as_its_own_process(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A child forked by a process of the container takes its own slot on its
    first call, is held to the same container cap, and its memory is
    reclaimed once it exits."""
    box = make_container(Limits((4 * MiB,)))
    parent = probes(box)
    assert parent.ask(f"alloc alloc {1 * MiB}").startswith("ok")
    first = parent.ask(f"forkalloc {2 * MiB} 300")
    lines = sorted([first, parent.reply()])  # parent and child write in either order
    assert lines[0] == "child ok"
    forked = lines[1].split()
    assert forked[0] == "forked"
    by_pid = {p.pid: p.total_bytes for p in read_usage(box.region).processes}
    assert by_pid == {parent.proc.pid: 1 * MiB, int(forked[1]): 2 * MiB}
    wait_until(lambda: used(box) == 1 * MiB, timeout=3.0)
