"""A container's usage file read cheaply every period: the fixed part only, new latencies only.

:func:`arkgpu.limiter.region.read_usage` reads and parses the whole usage file
(about 60 KB, most of it the 1024-entry latency ring) each call; at 64
containers and ten periods a second that is most of a control tick. A
:class:`UsageReader` keeps the file open and, each period,

* reads the record's fixed part (header, counters, process slots, batches in
  flight, the latency head: everything before the ring) with one ``pread``,
* parses only the fields a :class:`~arkgpu.limiter.region.Usage` holds, the
  process slots of live processes only, and
* reads from the ring only the entries after the last sequence number seen.

Offsets and sizes come from :mod:`arkgpu.limiter.layout` (the mirror of the C
header), so a layout change follows. The file is written by the container, so
the checks of :mod:`arkgpu.limiter.untrusted` apply unchanged: the header
(magic, version, size), a regular file at least one record long, no negative
in-flight time, no pid outside the kernel's range, no process slot (bytes and
driver reserve) summing past 2**64 bytes; anything else raises
:class:`~arkgpu.limiter.untrusted.RegionDataError`.
The file is read with ``pread`` on a descriptor, never mapped (a container
that truncates its file would make a mapping fault); when the path's file is
replaced, the reader opens the new one.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import operator
import os
import stat
import struct
import time
from pathlib import Path

from arkgpu.limiter import layout, slots
from arkgpu.limiter.latencies import LatencySample
from arkgpu.limiter.region import ProcessUsage, Usage, slot_usage
from arkgpu.limiter.untrusted import PID_MAX, RegionDataError, check_header

_U = layout.UsageStruct
_FLOCK = struct.Struct("hhqqi4x")
"""Linux's ``struct flock`` on 64-bit: l_type, l_whence, l_start, l_len, l_pid."""
_RECORD = ctypes.sizeof(_U)
_FIXED = _U.lat.offset
"""Bytes before the latency ring: what each period reads."""
_ENTRY = ctypes.sizeof(layout.LatencyEntryStruct)
_ENTRY_FORMAT = struct.Struct("<QQQQ")
_PROC = ctypes.sizeof(layout.ProcStruct)
_PIDS = struct.Struct("<" + f"I{_PROC - 4}x" * layout.MAX_PROCS)
"""Every slot's pid in one unpack (the pid is a slot's first field)."""
_PROCS_AT = _U.procs.offset
SLOTS_REREAD_S = 1.0
"""How long the process slots parsed from a usage file stand for it while their pids stay
the same: a slot's counters and its process's liveness (asked of /proc) are up to this old,
a process that attaches or whose slot is freed is seen at once, one that dies holding its
slot up to this late. Parsing the slots and asking /proc each period was most of a control
tick's cost at 64 containers; the record's own counters are read every period."""
_INFLIGHT = layout.InflightStruct


def _at(
    owner: type[ctypes.Structure], name: str, code: str, base: int = 0
) -> tuple[str, int, int, str]:
    """Field ``name`` of ``owner`` (at ``base`` in the record): name, offset, size, format."""
    desc = getattr(owner, name)
    return name, base + desc.offset, desc.size, code


_FIELDS = (
    _at(_U, "used", f"{layout.MAX_DEVICES}Q"),
    _at(_U, "busy_ns", f"{layout.MAX_DEVICES}Q"),
    _at(_U, "reserved", f"{layout.MAX_DEVICES}Q"),
    *(_at(_U, name, "Q") for name in ("reclaimed_bytes", "lock_recoveries")),
    *(_at(_U, name, "Q") for name in layout.DEGRADED_COUNTERS),
    _at(_INFLIGHT, "count", "Q", _U.inflight.offset),
    _at(_INFLIGHT, "since_ns", "q", _U.inflight.offset),
    _at(_INFLIGHT, "changed_ns", "q", _U.inflight.offset),
    _at(_INFLIGHT, "begun", "Q", _U.inflight.offset),
    _at(_U, "lat_head", "Q"),
)
"""The fields a :class:`Usage` holds: name, offset, size, struct format (offset order)."""


def _fixed_format() -> tuple[struct.Struct, dict[str, slice]]:
    """One unpack of every field in :data:`_FIELDS`, and each field's place in its result."""
    fmt, at, n = "<", 0, 0
    places = {}
    for name, offset, size, code in _FIELDS:
        width = struct.calcsize("<" + code)
        if width != size or offset < at:
            raise AssertionError(f"layout: {code} does not fit field {name}")
        count = width // struct.calcsize("<" + code[-1])
        fmt += f"{offset - at}x{code}"
        at = offset + width
        places[name] = slice(n, n + count)
        n += count
    return struct.Struct(fmt), places


_FIXED_FORMAT, _PLACES = _fixed_format()


def _getter(*names: str) -> operator.itemgetter[tuple[int, ...]]:
    """One C call that picks the scalar fields ``names`` out of an unpacked fixed part (a
    tuple: two names at least, as itemgetter gives one name's value alone)."""
    if len(names) < 2:
        raise AssertionError(f"layout: {names} is not a tuple of fields")
    return operator.itemgetter(*(_PLACES[name].start for name in names))


_INFLIGHT_GET = _getter("count", "since_ns", "changed_ns", "begun")
_SCALARS_GET = _getter("reclaimed_bytes", "lock_recoveries", "lat_head")
_DEGRADED_GET = _getter(*layout.DEGRADED_COUNTERS)
if _ENTRY_FORMAT.size != _ENTRY or _FIXED + layout.LATENCY_SLOTS * _ENTRY != _RECORD:
    raise AssertionError("layout: the latency ring is not the record's last field")


class UsageReader:
    """Reads one usage file period after period (call :meth:`read`, :meth:`latencies`)."""

    def __init__(self, path: Path) -> None:
        """Read ``path`` (opened at the first read)."""
        self.path = path
        self._name = os.fspath(path)
        self._fd = -1
        self._identity = (0, 0)
        self._slots: tuple[tuple[int, ...], float, tuple[ProcessUsage, ...]] | None = None
        """The slots' pids, when they were last parsed, and what that gave."""

    def close(self) -> None:
        """Close the file (a later read opens it again)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        """Close the descriptor with the reader."""
        self.close()

    def _descriptor(self) -> int:
        """The open file, reopened when the path now names another file."""
        st = os.stat(self._name)
        if (st.st_dev, st.st_ino) != self._identity or self._fd < 0:
            self.close()
            if not stat.S_ISREG(st.st_mode):
                raise RegionDataError(f"{self.path}: not a regular file")
            flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
            self._fd = os.open(self._name, flags)
            st = os.fstat(self._fd)
            if not stat.S_ISREG(st.st_mode):
                self.close()
                raise RegionDataError(f"{self.path}: not a regular file")
            self._identity = (st.st_dev, st.st_ino)
        if st.st_size < _RECORD:
            raise RegionDataError(
                f"{self.path}: {st.st_size} bytes, a record of this layout has {_RECORD}"
            )
        return self._fd

    def in_use(self) -> bool:
        """Whether a process holds the library's liveness lock on the file (an OFD read lock
        on its first byte, taken when the library maps it: ``limiter_core.c``), i.e. a
        process of the container that attached is alive, in whatever pid namespace. Asked
        with ``F_OFD_GETLK``, which takes no lock (OSError when the file is gone)."""
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        got = fcntl.fcntl(self._descriptor(), fcntl.F_OFD_GETLK, probe)
        return int(_FLOCK.unpack(got)[0]) != fcntl.F_UNLCK

    def _pread(self, size: int, offset: int) -> bytes:
        data = os.pread(self._descriptor(), size, offset)
        if len(data) < size:
            raise RegionDataError(f"{self.path}: shorter than a record of this layout")
        return data

    def read(self) -> Usage:
        """This period's usage (OSError, or RegionDataError naming the field)."""
        data = self._pread(_FIXED, 0)
        check_header(data, layout.USAGE_MAGIC, _RECORD, self.path)
        v = _FIXED_FORMAT.unpack_from(data)
        count, since, changed, begun = _INFLIGHT_GET(v)
        if since < 0 or changed < 0:
            which = "since_ns" if since < 0 else "changed_ns"
            raise RegionDataError(f"{self.path}: inflight.{which} is negative")
        reclaimed, recoveries, head = _SCALARS_GET(v)
        return Usage(
            used_bytes=v[_PLACES["used"]],
            busy_ns=v[_PLACES["busy_ns"]],
            reserved_bytes=self._reserved(v),
            processes=self._processes(data),
            reclaimed_bytes=reclaimed,
            lock_recoveries=recoveries,
            latency_head=head,
            batches_in_flight=count,
            in_flight_since_ns=since,
            in_flight_changed_ns=changed,
            batches_begun=begun,
            degraded=dict(zip(layout.DEGRADED_COUNTERS, _DEGRADED_GET(v), strict=True)),
        )

    def _reserved(self, v: tuple[int, ...]) -> tuple[int, ...]:
        reserved = v[_PLACES["reserved"]]
        if sum(v[_PLACES["used"]]) + sum(reserved) >= 1 << 64:
            raise RegionDataError(f"{self.path}: used and reserved sum past 2**64")
        return reserved

    def _processes(self, data: bytes) -> tuple[ProcessUsage, ...]:
        """The process slots in use: parsed again when their pids change or after
        :data:`SLOTS_REREAD_S`, else the records parsed last (:data:`SLOTS_REREAD_S`)."""
        pids = _PIDS.unpack_from(data, _PROCS_AT)  # unsigned: a negative pid is >= 2**31
        highest = max(pids)
        if not highest:
            return ()
        if highest >= PID_MAX:
            i = next(i for i, p in enumerate(pids) if p >= PID_MAX)
            pid = slots.SLOT.unpack_from(data, _PROCS_AT + i * _PROC)[slots.PID]
            raise RegionDataError(f"{self.path}: procs[{i}].pid {pid} is not a pid")
        now, last = time.monotonic(), self._slots
        if last is not None and last[0] == pids and now - last[1] < SLOTS_REREAD_S:
            return last[2]
        found = tuple(self._slot(data, i) for i in itertools.compress(range(len(pids)), pids))
        self._slots = (pids, now, found)
        return found

    def _slot(self, data: bytes, i: int) -> ProcessUsage:
        """Process slot ``i`` (its pid set), checked, its liveness asked of /proc."""
        values = slots.SLOT.unpack_from(data, _PROCS_AT + i * _PROC)
        if slots.held_sum(values) >= 1 << 64:
            raise RegionDataError(f"{self.path}: procs[{i}].bytes and reserve sum past 2**64")
        return slot_usage(values)

    def latencies(self, head: int, after_seq: int) -> list[LatencySample]:
        """Complete samples with sequence number in (``after_seq``, ``head``], oldest first.

        ``head`` is the latency head of this period's :meth:`read`. As
        :func:`arkgpu.limiter.latencies.read_latencies`: entries overwritten by newer
        ones are gone, an entry being written (its sequence number not yet its
        ticket's) is skipped.
        """
        return [LatencySample(*entry) for entry in self.entries(head, after_seq)]

    def entries(self, head: int, after_seq: int) -> list[tuple[int, int, int, int]]:
        """:meth:`latencies` as plain (seq, t_ns, latency_ns, batch) tuples (the loop's)."""
        slots = layout.LATENCY_SLOTS
        ticket = max(after_seq, head - slots)
        out = []
        while ticket < head:  # at most two runs: up to the ring's end, then from its start
            slot = ticket % slots
            count = min(head - ticket, slots - slot)
            data = self._pread(count * _ENTRY, _FIXED + slot * _ENTRY)
            out += [
                e for k, e in enumerate(_ENTRY_FORMAT.iter_unpack(data)) if e[0] == ticket + k + 1
            ]
            ticket += count
        return out
