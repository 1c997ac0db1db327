"""The Python mirror of the region layout matches the C header."""

import json
import subprocess

from arkgpu.limiter import layout, native


def test_python_mirror_matches_c_header_sizes_and_offsets() -> None:
    """Every field's offset and size, every struct's size and the shared
    constants agree between arkgpu_region.h (compiled) and layout.py."""
    printed = json.loads(subprocess.check_output([str(native.layout_printer())], text=True))
    mutex_size = printed.pop("sizeof.pthread_mutex_t")
    assert printed == layout.mirror_layout()
    assert mutex_size <= layout.LOCK_BYTES


def test_layout_version_4_counts_the_driver_reserve() -> None:
    """Version 2 added the lent shares to the limits and the in-flight counter
    (one 64-byte line) to the usage file; version 3 the counters of the
    library's degraded paths; version 4 the driver reserve: one figure per
    device in each process slot, their sum per device in the usage header, two
    counters of processes whose reserve could not be measured, and the
    measurement's period and margin in the limits."""
    printed = json.loads(subprocess.check_output([str(native.layout_printer())], text=True))
    assert printed["const.ARKGPU_LAYOUT_VERSION"] == layout.LAYOUT_VERSION == 4
    assert printed["arkgpu_limits.lent_bp"][1] == 4 * layout.MAX_LENDERS
    assert printed["sizeof.arkgpu_inflight"] == 64
    for name in layout.DEGRADED_COUNTERS:
        assert printed[f"arkgpu_usage.{name}"][1] == 8
    assert {"reserve_unlisted", "reserve_no_nvml"} <= set(layout.DEGRADED_COUNTERS)
    assert printed["arkgpu_proc.reserve"][1] == 8 * layout.MAX_DEVICES
    assert printed["arkgpu_usage.reserved"][1] == 8 * layout.MAX_DEVICES
    assert printed["arkgpu_limits.reserve_period_ms"][1] == 4
    assert printed["arkgpu_limits.reserve_margin_mib"][1] == 4
