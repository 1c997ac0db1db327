"""How applications reach the hooks: dlsym by handle, cuGetProcAddress, and the
per-thread-stream and versioned names."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from arkgpu.limiter import Limits
from arkgpu.limiter.containers import FakeContainer

from .conftest import Probe


@pytest.mark.parametrize(
    ("symbol", "expect"),
    [
        ("cuMemAlloc", "hook"),
        ("cuMemCreate", "hook"),
        ("cuMemAllocFromPoolAsync", "hook"),
        ("cuLaunchKernel", "hook"),
        ("cuLaunchKernelEx", "hook"),
        ("cuLaunchCooperativeKernel", "hook"),
        ("cuGraphLaunch", "hook"),
        ("cuMemGetInfo", "hook"),
        ("cuGetProcAddress", "hook"),
        ("cuCtxCreate", "real"),
        ("cuEventRecord", "real"),
    ],
)
def test_cu_get_proc_address_hands_out_hooks_for_hooked_symbols(
    make_container: Callable[..., FakeContainer],
    probes: Callable[..., Probe],
    symbol: str,
    expect: str,
) -> None:
    """cuGetProcAddress_v2 with a base name (the driver picks the _v2 version)
    returns the limiter's function for hooked symbols and the driver's for the
    rest."""
    probe = probes(make_container(Limits((None,))))
    assert probe.ask(f"procaddr {symbol}") == expect
