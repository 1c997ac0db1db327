"""Reading what a container writes: its usage file (memory counts, busy time,
latency reports, batches in flight) is written by the container's own
processes, so any bytes may be there. Everything read from it goes through
this module, which either returns figures that make sense (no negative
counts, no pid outside the kernel's range) or raises :class:`RegionDataError`
with a one-line message naming the file and the field; never another
exception, never a crash of the node side.

Files are read with a bounded ``read`` of one record from a regular file
opened non-blocking: a container that grows its file or replaces it with a
FIFO costs the node nothing.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
from pathlib import Path

from arkgpu.limiter import layout

#: The largest pid Linux hands out (``PID_MAX_LIMIT`` on 64-bit kernels).
PID_MAX = 1 << 22
STAT_READ = 4096
"""Bytes of /proc/<pid>/stat read (the line is some 300; a comm of 16 at most)."""


class RegionDataError(ValueError):
    """A region file holds bytes that are not a valid record of this layout."""


def read_record(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of the regular file ``path``.

    OSError when it cannot be opened; RegionDataError when it is not a regular
    file or is shorter than ``size``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RegionDataError(f"{path}: not a regular file")
        data = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    if len(data) < size:
        raise RegionDataError(f"{path}: {len(data)} bytes, a record of this layout has {size}")
    return data


def check_header(data: bytes, magic: int, size: int, path: Path) -> None:
    """RegionDataError unless ``data`` starts with this layout's header."""
    found, version, found_size = struct.unpack_from("<QII", data, 0)
    if found != magic:
        raise RegionDataError(f"{path}: not an ArkGPU region file (bad magic)")
    if version != layout.LAYOUT_VERSION:
        raise RegionDataError(
            f"{path}: layout version {version}, this node side reads version "
            f"{layout.LAYOUT_VERSION} only (library and node side are upgraded together)"
        )
    if found_size != size:
        raise RegionDataError(f"{path}: field size is {found_size}, not {size}")


def usage_struct(path: Path) -> layout.UsageStruct:
    """The validated usage structure in ``path`` (see :func:`check_usage`)."""
    size = ctypes.sizeof(layout.UsageStruct)
    data = read_record(path, size)
    check_header(data, layout.USAGE_MAGIC, size, path)
    u = layout.UsageStruct.from_buffer_copy(data)
    check_usage(u, path)
    return u


def check_usage(u: layout.UsageStruct, path: Path) -> None:
    """RegionDataError for fields no library would write: a negative time of
    the in-flight counter, a pid outside 0..PID_MAX, a process slot's bytes
    and driver reserve summing past 2**64."""
    for name in ("since_ns", "changed_ns"):
        if getattr(u.inflight, name) < 0:
            raise RegionDataError(f"{path}: inflight.{name} is negative")
    for i, p in enumerate(u.procs):
        if not 0 <= p.pid < PID_MAX:
            raise RegionDataError(f"{path}: procs[{i}].pid {p.pid} is not a pid")
        if p.pid and sum(sum(row) for row in p.bytes) >= 1 << 64:
            raise RegionDataError(f"{path}: procs[{i}].bytes sum past 2**64")
        if p.pid and sum(sum(row) for row in p.bytes) + sum(p.reserve) >= 1 << 64:
            raise RegionDataError(f"{path}: procs[{i}].reserve and bytes sum past 2**64")
    if sum(u.used) + sum(u.reserved) >= 1 << 64:
        raise RegionDataError(f"{path}: used and reserved sum past 2**64")


def start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat (start time); 0 for a gone or zombie
    process, or a pid this node cannot read."""
    if not 0 < pid < PID_MAX:
        return 0
    try:  # os calls, not pathlib: the node runtime asks for every process every period
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            stat_line = os.read(fd, STAT_READ)
        finally:
            os.close(fd)
        fields = stat_line[stat_line.rindex(b")") + 2 :].split()
        return 0 if fields[0] in (b"Z", b"X") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return 0
