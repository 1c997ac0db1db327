"""Create, read and update a container's control region (the node side).

A region is a directory with two files (layout in ``native/arkgpu_region.h``):
``limits``, written here only and mapped read-only by the container, and
``usage``, written by the interception library in the container's processes.
A best-effort container that borrows idle share also has ``lenders/<k>``, the
usage file of lender k (:mod:`arkgpu.limiter.lending`). The LC latency channel in
``usage`` is read by :mod:`arkgpu.limiter.latencies`.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import mmap
import os
import stat
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from arkgpu.limiter import layout, slots
from arkgpu.limiter.untrusted import RegionDataError, start_ticks, usage_struct
from arkgpu.model.shares import SHARE_FULL_BP, check_share_bp

LIMITS_FILE = "limits"
USAGE_FILE = "usage"
_PTHREAD_PROCESS_SHARED = 1
_PTHREAD_MUTEX_ROBUST = 1


class Mode(enum.Enum):
    """How a container may use GPU time beyond its share."""

    HARD = "hard"
    """Never above the share."""
    ELASTIC = "elastic"
    """May use GPU time that the other containers leave idle."""


@dataclass(frozen=True)
class Limits:
    """A container's limits, as the node side sets them."""

    memory_bytes: tuple[int | None, ...]
    """Memory cap per GPU ordinal in bytes; None means no cap."""
    share_bp: int = SHARE_FULL_BP
    """Compute share of each GPU in basis points (0..10000, :mod:`arkgpu.model.shares`);
    the whole GPU turns pacing off."""
    mode: Mode = Mode.HARD
    """Hard or elastic compute limit."""
    burst_us: int = 20_000
    """Pacing bucket depth at full share in µs: 20 ms lets a few ms-long kernels
    through back to back while keeping any 100 ms window near the share."""
    lent_bp: tuple[int, ...] = ()
    """Share lender k lends while it has no batch in flight, basis points
    (0..10000 each, at most 8 lenders); lender k's usage file must be visible
    at ``lenders/<k>`` (:func:`arkgpu.limiter.lending.link_lender`). Empty: the
    container borrows nothing."""
    lend_stale_ms: int = layout.LEND_STALE_MS
    """A lender's in-flight count left unchanged this long counts as idle, ms.
    A crashed LC process never ends its batch and pids cannot be checked across
    containers, so time decides; 5 s is far above an inference batch's time."""
    reserve_period_ms: int = 1000
    """How often each process measures its driver reserve (context, modules,
    allocator slack: NVML's figure minus its requested bytes) in the background,
    ms; rounded up to the library's 200 ms reaper tick; 0: only before its first
    allocation and near the cap. 1 s keeps the NVML call (tens of µs to a few
    ms on a real driver) off the allocation path and a growing reserve (modules
    loaded late) counted within a second."""
    reserve_margin_mib: int = 64
    """An allocation that would come within this many MiB of the cap measures the
    reserve first (at most every 10 ms), MiB: the reserve of a process changes by
    a few MiB per module load, so 64 MiB catches a stale figure before it
    matters without measuring when the cap is far."""

    def __post_init__(self) -> None:
        check_share_bp(self.share_bp, "share_bp")
        if len(self.memory_bytes) > layout.MAX_DEVICES:
            raise ValueError(
                f"memory_bytes: at most {layout.MAX_DEVICES} devices, got {len(self.memory_bytes)}"
            )
        if any(b is not None and not 0 <= b < layout.MEM_UNLIMITED for b in self.memory_bytes):
            raise ValueError(
                f"memory_bytes: memory caps must be non-negative bytes: {self.memory_bytes}"
            )
        if not 0 < self.burst_us < 2**32:
            raise ValueError(f"burst_us must be positive, got {self.burst_us}")
        for name in ("reserve_period_ms", "reserve_margin_mib"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value < 2**32:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self._check_lending()

    def _check_lending(self) -> None:
        if len(self.lent_bp) > layout.MAX_LENDERS:
            raise ValueError(
                f"lent_bp: at most {layout.MAX_LENDERS} lenders, got {len(self.lent_bp)}"
            )
        for k, bp in enumerate(self.lent_bp):
            check_share_bp(bp, f"lent_bp[{k}]")
        if not isinstance(self.lend_stale_ms, int) or not 0 < self.lend_stale_ms < 2**32:
            raise ValueError(
                f"lend_stale_ms must be a positive integer, got {self.lend_stale_ms!r}"
            )


@dataclass(frozen=True)
class ProcessUsage:
    """One process's usage as the library wrote it."""

    pid: int
    bytes_by_kind: dict[str, tuple[int, ...]]
    """Kind name -> bytes per GPU ordinal."""
    busy_ns: int
    launches: int
    throttled_ns: int
    oom_refusals: int
    alive: bool
    """The process still runs (judged from /proc: valid in the container's pid namespace)."""
    in_lock: bool = False
    """The process holds the region lock (or died holding it)."""
    reserve_bytes: tuple[int, ...] = ()
    """Driver reserve per GPU ordinal (context, modules, allocator slack: NVML's
    per-process figure minus the bytes asked for), counted in the cap; 0 where
    not measured (docs/LIMITER.md, Driver reserve)."""

    @property
    def total_bytes(self) -> int:
        """Device memory the process asked for, over kinds and GPUs (the driver
        reserve aside: :attr:`held_bytes`)."""
        return sum(sum(v) for v in self.bytes_by_kind.values())

    @property
    def held_bytes(self) -> int:
        """Device memory the process holds: asked for plus driver reserve, all GPUs."""
        return self.total_bytes + sum(self.reserve_bytes)


@dataclass(frozen=True)
class Usage:
    """A snapshot of a container's usage file."""

    used_bytes: tuple[int, ...]
    """Bytes asked for by live processes, per GPU ordinal (the driver reserve
    aside: :attr:`reserved_bytes`; the cap holds both)."""
    busy_ns: tuple[int, ...]
    """Container busy time measured per GPU, ns."""
    processes: tuple[ProcessUsage, ...]
    reclaimed_bytes: int
    lock_recoveries: int
    latency_head: int
    batches_in_flight: int
    """LC batches begun and not yet ended (``arkgpu_client_batch_begin``/``end``)."""
    in_flight_since_ns: int
    """CLOCK_MONOTONIC when the in-flight count last went from 0 to 1; 0: never."""
    in_flight_changed_ns: int
    """CLOCK_MONOTONIC of the last batch begin or end; 0: never."""
    batches_begun: int
    reserved_bytes: tuple[int, ...] = ()
    """Driver reserve of live processes per GPU ordinal (the sum of their
    :attr:`ProcessUsage.reserve_bytes`), counted in the cap."""
    degraded: dict[str, int] = field(default_factory=dict)
    """Counters of the library's degraded paths by name
    (:data:`arkgpu.limiter.layout.DEGRADED_COUNTERS`, docs/LIMITER.md, Bounds)."""

    @property
    def held_bytes(self) -> tuple[int, ...]:
        """What the cap holds per GPU ordinal: requested bytes plus driver reserve."""
        reserved = self.reserved_bytes or (0,) * len(self.used_bytes)
        return tuple(u + r for u, r in zip(self.used_bytes, reserved, strict=True))


def _limits_struct(limits: Limits, generation: int) -> layout.LimitsStruct:
    s = layout.LimitsStruct()
    s.magic, s.version, s.size = layout.LIMITS_MAGIC, layout.LAYOUT_VERSION, ctypes.sizeof(s)
    s.generation = generation
    s.mode = layout.MODE_ELASTIC if limits.mode is Mode.ELASTIC else layout.MODE_HARD
    s.share_bp = limits.share_bp
    s.num_devices = len(limits.memory_bytes)
    s.burst_us = limits.burst_us
    for i, cap in enumerate(limits.memory_bytes):
        s.mem_limit[i] = layout.MEM_UNLIMITED if cap is None else cap
    s.lend_count = len(limits.lent_bp)
    s.lend_stale_ms = limits.lend_stale_ms
    for k, bp in enumerate(limits.lent_bp):
        s.lent_bp[k] = bp
    s.reserve_period_ms = limits.reserve_period_ms
    s.reserve_margin_mib = limits.reserve_margin_mib
    return s


def _init_robust_mutex(buffer: mmap.mmap, offset: int) -> None:
    """Initialise a robust, process-shared pthread mutex inside the mapping."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(64)
    target = ctypes.c_char.from_buffer(buffer, offset)
    try:
        calls = (
            libc.pthread_mutexattr_init(attr),
            libc.pthread_mutexattr_setpshared(attr, _PTHREAD_PROCESS_SHARED),
            libc.pthread_mutexattr_setrobust(attr, _PTHREAD_MUTEX_ROBUST),
            libc.pthread_mutex_init(ctypes.byref(target), attr),
        )
    finally:
        del target
    if any(calls):
        raise OSError(f"pthread mutex initialisation failed: {calls}")


def _write_new(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    if owner is not None:
        os.chown(tmp, *owner)
    os.replace(tmp, path)


def create_region(
    directory: Path, limits: Limits, container_owner: tuple[int, int] | None = None
) -> Path:
    """Create the region in ``directory`` (made if missing) and return it.

    ``limits`` is mode 0644 and owned by the caller, so the container (another
    user, or a read-only mount) cannot write it; ``usage`` belongs to
    ``container_owner`` (uid, gid) with mode 0644 when given (borrowers of an LC
    container's idle share read it), else mode 0666.
    """
    directory.mkdir(parents=True, exist_ok=True)
    _write_new(directory / LIMITS_FILE, bytes(_limits_struct(limits, 0)), 0o644, None)
    usage = layout.UsageStruct()
    usage.magic, usage.version, usage.size = (
        layout.USAGE_MAGIC,
        layout.LAYOUT_VERSION,
        ctypes.sizeof(usage),
    )
    path = directory / USAGE_FILE
    _write_new(path, bytes(usage), 0o644 if container_owner else 0o666, container_owner)
    with path.open("r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        _init_robust_mutex(m, layout.UsageStruct.lock.offset)
    return directory


def write_limits(directory: Path, limits: Limits) -> None:
    """Change a running container's limits in place (seqlock: odd while writing)."""
    path = directory / LIMITS_FILE
    gen_off = layout.LimitsStruct.generation.offset
    with open_limits_for_update(path) as f, mmap.mmap(f.fileno(), 0) as m:
        _check(m, layout.LIMITS_MAGIC, path)
        (generation,) = struct.unpack_from("<Q", m, gen_off)
        base = generation + (generation & 1)  # odd: a writer died mid-write
        struct.pack_into("<Q", m, gen_off, base + 1)
        new = bytes(_limits_struct(limits, base + 1))
        m[gen_off + 8 : len(new)] = new[gen_off + 8 :]
        struct.pack_into("<Q", m, gen_off, base + 2)


def open_limits_for_update(path: Path) -> BinaryIO:
    """Open the limits file for writing; a read-only file we own is reopened
    through a momentary owner write bit (the non-root test setup)."""
    try:
        return path.open("r+b")
    except PermissionError:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IWUSR)
        try:
            return path.open("r+b")
        finally:
            path.chmod(mode)


def _check(buffer: bytes | mmap.mmap, magic: int, path: Path) -> None:
    found, version = struct.unpack_from("<QI", buffer, 0)
    if found != magic or version != layout.LAYOUT_VERSION:
        raise RegionDataError(
            f"{path}: not an ArkGPU region file of layout {layout.LAYOUT_VERSION}"
            f" (magic {found:#x}, version {version})"
        )


def _limits_consistent(path: Path, wait_s: float = 5.0) -> layout.LimitsStruct:
    """A copy of the limits record read through its seqlock: the generation is
    even and the same before and after the copy. A writer descheduled mid-write
    (a loaded node) is waited for up to ``wait_s`` seconds, sleeping between
    tries after the first thousand; a generation still odd then means the writer
    died mid-write (its next write heals the record: see :func:`write_limits`)."""
    gen_off = layout.LimitsStruct.generation.offset
    size = ctypes.sizeof(layout.LimitsStruct)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        _check(m, layout.LIMITS_MAGIC, path)
        if len(m) < size:
            raise RegionDataError(f"{path}: shorter than a limits record")
        deadline = time.monotonic() + wait_s
        for attempt in itertools.count():
            (before,) = struct.unpack_from("<Q", m, gen_off)
            data = m[:size]
            (after,) = struct.unpack_from("<Q", m, gen_off)
            if before == after and not before & 1:
                return layout.LimitsStruct.from_buffer_copy(data)
            if attempt >= 1000:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.001)
    raise RegionDataError(f"{path}: a write of the limits never completed")


def read_limits(directory: Path) -> Limits:
    """The container's current limits (never a half-written update)."""
    s = _limits_consistent(directory / LIMITS_FILE)
    caps = tuple(
        None if c == layout.MEM_UNLIMITED else int(c)
        for c in s.mem_limit[: min(s.num_devices, layout.MAX_DEVICES)]
    )
    mode = Mode.ELASTIC if s.mode == layout.MODE_ELASTIC else Mode.HARD
    return Limits(
        caps,
        min(int(s.share_bp), SHARE_FULL_BP),
        mode,
        int(s.burst_us),
        tuple(int(bp) for bp in s.lent_bp[: min(s.lend_count, layout.MAX_LENDERS)]),
        int(s.lend_stale_ms) or layout.LEND_STALE_MS,
        int(s.reserve_period_ms),
        int(s.reserve_margin_mib),
    )


def _read_usage_struct(directory: Path) -> layout.UsageStruct:
    return read_usage_file(directory / USAGE_FILE)


def read_usage_file(path: Path) -> layout.UsageStruct:
    """The raw usage structure in ``path``, validated (the container wrote it):
    :class:`RegionDataError` when it is not a sound one of this layout."""
    return usage_struct(path)


def process_usage(p: layout.ProcStruct) -> ProcessUsage:
    """One process slot of the usage region as a record."""
    return slot_usage(slots.SLOT.unpack(bytes(p)))


def slot_usage(values: tuple[int, ...]) -> ProcessUsage:
    """One process slot, unpacked by :data:`arkgpu.limiter.slots.SLOT`, as a record (the node
    runtime's reader calls it too, after its own checks); ``alive`` asked of /proc."""
    pid = values[slots.PID]
    return ProcessUsage(
        pid,
        slots.bytes_by_kind(values),
        values[slots.BUSY_NS],
        values[slots.LAUNCHES],
        values[slots.THROTTLED_NS],
        values[slots.OOM_REFUSALS],
        alive=start_ticks(pid) == values[slots.START_TICKS],
        in_lock=bool(values[slots.FLAGS] & layout.PROC_IN_LOCK),
        reserve_bytes=values[slots.RESERVE],
    )


def read_usage(directory: Path) -> Usage:
    """A snapshot of the container's usage (no lock: counters may be mid-update);
    :class:`RegionDataError` when the file is not a sound usage record."""
    return usage_snapshot(_read_usage_struct(directory))


def usage_snapshot(u: layout.UsageStruct) -> Usage:
    """The :class:`Usage` view of a raw usage structure."""
    return Usage(
        used_bytes=tuple(int(x) for x in u.used),
        busy_ns=tuple(int(x) for x in u.busy_ns),
        reserved_bytes=tuple(int(x) for x in u.reserved),
        processes=tuple(process_usage(p) for p in u.procs if p.pid),
        reclaimed_bytes=int(u.reclaimed_bytes),
        lock_recoveries=int(u.lock_recoveries),
        latency_head=int(u.lat_head),
        batches_in_flight=int(u.inflight.count),
        in_flight_since_ns=int(u.inflight.since_ns),
        in_flight_changed_ns=int(u.inflight.changed_ns),
        batches_begun=int(u.inflight.begun),
        degraded={name: int(getattr(u, name)) for name in layout.DEGRADED_COUNTERS},
    )
