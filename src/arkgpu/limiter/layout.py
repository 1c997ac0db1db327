"""Python mirror of the control region layout in ``native/arkgpu_region.h``.

The structures below must match the C header field for field; a test compiles
the header's layout printer and compares every size and offset.
"""

from __future__ import annotations

import ctypes

from arkgpu.model.shares import SHARE_FULL_BP

LAYOUT_VERSION = 4
LIMITS_MAGIC = 0x53544D494C4B5241  # "ARKLIMTS"
USAGE_MAGIC = 0x45474153554B5241  # "ARKUSAGE"
MAX_DEVICES = 8
MAX_PROCS = 64
LATENCY_SLOTS = 1024
MAX_LENDERS = 8
LEND_STALE_MS = 5000
SHARE_FULL = SHARE_FULL_BP
MEM_UNLIMITED = (1 << 64) - 1
LOCK_BYTES = 64
#: Memory kinds in the order of ``enum arkgpu_kind``.
KINDS: tuple[str, ...] = ("alloc", "managed", "vmm", "async", "pool", "array")
MODE_HARD = 0
MODE_ELASTIC = 1
#: ``arkgpu_proc.flags``: the process holds the region lock.
PROC_IN_LOCK = 1

U64 = ctypes.c_uint64
I64 = ctypes.c_int64
U32 = ctypes.c_uint32


class LimitsStruct(ctypes.Structure):
    """``arkgpu_limits``: written by the node side only."""

    _fields_ = (
        ("magic", U64),
        ("version", U32),
        ("size", U32),
        ("generation", U64),
        ("mode", U32),
        ("share_bp", U32),
        ("num_devices", U32),
        ("burst_us", U32),
        ("mem_limit", U64 * MAX_DEVICES),
        ("lend_count", U32),
        ("lend_stale_ms", U32),
        ("lent_bp", U32 * MAX_LENDERS),
        ("reserve_period_ms", U32),
        ("reserve_margin_mib", U32),
    )


class ProcStruct(ctypes.Structure):
    """``arkgpu_proc``: one process's usage."""

    _fields_ = (
        ("pid", ctypes.c_int32),
        ("flags", U32),
        ("start_ticks", U64),
        ("bytes", (U64 * len(KINDS)) * MAX_DEVICES),
        ("busy_ns", U64),
        ("launches", U64),
        ("throttled_ns", U64),
        ("oom_refusals", U64),
        ("reserve", U64 * MAX_DEVICES),
    )


class LatencyEntryStruct(ctypes.Structure):
    """``arkgpu_latency_entry``: one LC latency sample."""

    _fields_ = (("seq", U64), ("t_ns", U64), ("latency_ns", U64), ("batch", U64))


class InflightStruct(ctypes.Structure):
    """``arkgpu_inflight``: an LC container's batches in flight (idle-share lending)."""

    _fields_ = (
        ("count", U64),
        ("since_ns", I64),
        ("changed_ns", I64),
        ("begun", U64),
        ("pad", U64 * 4),
    )


class UsageStruct(ctypes.Structure):
    """``arkgpu_usage``: written by the library in the container's processes."""

    _fields_ = (
        ("magic", U64),
        ("version", U32),
        ("size", U32),
        ("lock", ctypes.c_uint8 * LOCK_BYTES),
        ("used", U64 * MAX_DEVICES),
        ("credit_ns", I64 * MAX_DEVICES),
        ("refill_ns", I64 * MAX_DEVICES),
        ("busy_ns", U64 * MAX_DEVICES),
        ("reserved", U64 * MAX_DEVICES),
        ("reclaimed_bytes", U64),
        ("lock_recoveries", U64),
        ("queue_waits", U64),
        ("unmeasured", U64),
        ("events_dropped", U64),
        ("limits_waits", U64),
        ("lock_errors", U64),
        ("slot_refusals", U64),
        ("reserve_unlisted", U64),
        ("reserve_no_nvml", U64),
        ("procs", ProcStruct * MAX_PROCS),
        ("inflight", InflightStruct),
        ("lat_head", U64),
        ("lat_pad", U64 * 7),
        ("lat", LatencyEntryStruct * LATENCY_SLOTS),
    )


#: The usage region's counters of degraded paths (docs/LIMITER.md, Bounds).
DEGRADED_COUNTERS: tuple[str, ...] = (
    "queue_waits",
    "unmeasured",
    "events_dropped",
    "limits_waits",
    "lock_errors",
    "slot_refusals",
    "reserve_unlisted",
    "reserve_no_nvml",
)

#: C struct name -> its mirror, for the layout test.
MIRRORS: dict[str, type[ctypes.Structure]] = {
    "arkgpu_limits": LimitsStruct,
    "arkgpu_proc": ProcStruct,
    "arkgpu_latency_entry": LatencyEntryStruct,
    "arkgpu_inflight": InflightStruct,
    "arkgpu_usage": UsageStruct,
}


def mirror_layout() -> dict[str, object]:
    """The mirror's layout in the JSON shape that ``arkgpu-layout`` prints."""
    out: dict[str, object] = {}
    for cname, struct in MIRRORS.items():
        for field in struct._fields_:
            name = field[0]
            desc = getattr(struct, name)
            out[f"{cname}.{name}"] = [desc.offset, desc.size]
        out[f"sizeof.{cname}"] = ctypes.sizeof(struct)
    out["const.ARKGPU_LAYOUT_VERSION"] = LAYOUT_VERSION
    out["const.ARKGPU_LIMITS_MAGIC"] = LIMITS_MAGIC
    out["const.ARKGPU_USAGE_MAGIC"] = USAGE_MAGIC
    out["const.ARKGPU_MAX_DEVICES"] = MAX_DEVICES
    out["const.ARKGPU_MAX_PROCS"] = MAX_PROCS
    out["const.ARKGPU_KINDS"] = len(KINDS)
    out["const.ARKGPU_LATENCY_SLOTS"] = LATENCY_SLOTS
    out["const.ARKGPU_MAX_LENDERS"] = MAX_LENDERS
    out["const.ARKGPU_LEND_STALE_MS"] = LEND_STALE_MS
    return out
