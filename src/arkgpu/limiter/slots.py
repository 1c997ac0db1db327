"""A process slot of a usage file (``arkgpu_proc``) unpacked with one precompiled struct.

Both readers of a usage file turn a slot into a
:class:`~arkgpu.limiter.region.ProcessUsage` here: the limiter's whole-file reader
(:func:`arkgpu.limiter.region.process_usage`, from a ctypes structure) and the node
runtime's period reader (:mod:`arkgpu.node.reading`, from the bytes it read). One
``struct.unpack_from`` of the slot replaces a walk over ctypes arrays, which cost
the node runtime most of its control tick once every container had a live process.
"""

from __future__ import annotations

import ctypes
import struct

from arkgpu.limiter import layout

_KINDS = len(layout.KINDS)
_DEVICES = layout.MAX_DEVICES
_BYTES = _DEVICES * _KINDS
SLOT = struct.Struct(f"<iIQ{_BYTES}QQQQQ{_DEVICES}Q")
"""One slot: pid, flags, start_ticks, bytes[device][kind], busy_ns, launches,
throttled_ns, oom_refusals, reserve[device]."""
PID, FLAGS, START_TICKS = 0, 1, 2
BYTES = slice(3, 3 + _BYTES)
BUSY_NS, LAUNCHES, THROTTLED_NS, OOM_REFUSALS = range(3 + _BYTES, 7 + _BYTES)
RESERVE = slice(7 + _BYTES, 7 + _BYTES + _DEVICES)


def _check_layout() -> None:
    """The struct's offsets are the ctypes mirror's (a layout change must change both)."""
    p = layout.ProcStruct
    places = (
        (p.start_ticks.offset, struct.calcsize("<iI")),
        (p.bytes.offset, struct.calcsize("<iIQ")),
        (p.busy_ns.offset, struct.calcsize(f"<iIQ{_BYTES}Q")),
        (p.reserve.offset, struct.calcsize(f"<iIQ{_BYTES}QQQQQ")),
    )
    if SLOT.size != ctypes.sizeof(p) or any(a != b for a, b in places):
        raise AssertionError("layout: the process slot's struct does not match ProcStruct")


_check_layout()


_BY_KIND = tuple(
    (kind, slice(BYTES.start + i, BYTES.stop, _KINDS)) for i, kind in enumerate(layout.KINDS)
)
"""Each kind's bytes per GPU ordinal within an unpacked slot ([device][kind] order)."""


def bytes_by_kind(values: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """Kind name -> bytes per GPU ordinal, from an unpacked slot."""
    return {kind: values[at] for kind, at in _BY_KIND}


def held_sum(values: tuple[int, ...]) -> int:
    """Bytes asked for (every kind and GPU) plus the driver reserve, of an unpacked slot."""
    return sum(values[BYTES]) + sum(values[RESERVE])
