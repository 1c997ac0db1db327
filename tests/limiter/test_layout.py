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


def test_layout_version_3_counts_degraded_paths() -> None:
    """Version 2 added the lent shares to the limits and the in-flight counter
    (one 64-byte line) to the usage file; version 3 adds the counters of the
    library's degraded paths to the usage file."""
    printed = json.loads(subprocess.check_output([str(native.layout_printer())], text=True))
    assert printed["const.ARKGPU_LAYOUT_VERSION"] == layout.LAYOUT_VERSION == 3
    assert printed["arkgpu_limits.lent_bp"][1] == 4 * layout.MAX_LENDERS
    assert printed["sizeof.arkgpu_inflight"] == 64
    for name in layout.DEGRADED_COUNTERS:
        assert printed[f"arkgpu_usage.{name}"][1] == 8
