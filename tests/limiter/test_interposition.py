"""How applications reach the hooks: dlsym by handle, cuGetProcAddress, and the
per-thread-stream and versioned names."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from arkgpu.limiter import Limits, native
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
@pytest.mark.parametrize("command", ["procaddr", "procaddr1"])
def test_cu_get_proc_address_hands_out_hooks_for_hooked_symbols(
    make_container: Callable[..., FakeContainer],
    probes: Callable[..., Probe],
    symbol: str,
    expect: str,
    command: str,
) -> None:
    """cuGetProcAddress_v2 and cuGetProcAddress (CUDA 11 signature) with a base
    name (the driver picks the _v2 version) return the limiter's function for
    hooked symbols and the driver's for the rest."""
    probe = probes(make_container(Limits((None,))))
    assert probe.ask(f"{command} {symbol}") == expect


@pytest.mark.parametrize(
    "symbol",
    [
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuGraphLaunch",
        "cuMemAllocAsync",
        "cuMemAllocFromPoolAsync",
    ],
)
def test_per_thread_stream_lookups_get_the_ptsz_hooks(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe], symbol: str
) -> None:
    """cuGetProcAddress_v2 with the per-thread-default-stream flag (what the
    runtime asks when built with --default-stream per-thread) hands out the
    limiter's ``_ptsz`` hook, not the driver's ``_ptsz`` function."""
    probe = probes(make_container(Limits((None,))))
    assert probe.ask(f"procaddrpt {symbol}") == f"hook {symbol}_ptsz"


def test_a_client_linked_against_the_driver_gets_the_hooks(
    make_container: Callable[..., FakeContainer],
) -> None:
    """A program linked with -lcuda (no dlsym) is limited too: the preloaded
    library's exports win symbol resolution. Without the preload the same
    allocation succeeds on the fake GPU."""
    box = make_container(Limits((1 << 20,)))
    args = [str(native.linked_probe()), str(2 << 20)]
    limited = subprocess.run(
        args, capture_output=True, text=True, env=box.env(), user=box.user, check=True
    )
    plain = subprocess.run(
        args, capture_output=True, text=True, env=box.env(preload=False), user=box.user, check=True
    )
    assert (limited.stdout.strip(), plain.stdout.strip()) == ("2", "0")
