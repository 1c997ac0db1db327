"""A container cannot raise its own limits: not through environment variables,
not by pointing the library at a region it made, not by writing the limits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from arkgpu.limiter import Limits, create_region, read_limits
from arkgpu.limiter.containers import FakeContainer

from .conftest import MiB, Probe

#: Environment variables other limiters read, and guesses at ours.
RAISING_ENV = {
    "CUDA_DEVICE_MEMORY_LIMIT": "100g",
    "CUDA_DEVICE_MEMORY_LIMIT_0": "100g",
    "CUDA_DEVICE_SM_LIMIT": "100",
    "ARKGPU_MEMORY_LIMIT": str(100 << 30),
    "ARKGPU_SHARE": "100",
    "ARKGPU_MODE": "elastic",
}


def test_environment_variables_cannot_raise_a_limit(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """With every limit-sounding variable set high, the cap still refuses."""
    box = make_container(Limits((4 * MiB,), share_bp=5000))
    probe = probes(box, RAISING_ENV)
    assert probe.ask(f"alloc alloc {3 * MiB}").startswith("ok")
    assert probe.ask(f"alloc alloc {2 * MiB}") == "oom"
    assert probe.ask("info") == f"{1 * MiB} {4 * MiB}"


def test_a_region_the_container_wrote_itself_is_refused(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe], workdir: Path
) -> None:
    """ARKGPU_REGION_DIR pointed at a region whose limits file the process can
    write (one it could have forged) puts the library in deny mode: memory is
    refused and launches are not permitted. No region at all does the same."""
    box = make_container(Limits((4 * MiB,)))
    forged = workdir / "forged"
    create_region(forged, Limits((None,)))
    (forged / "limits").chmod(0o666)
    for region in (str(forged), str(workdir / "missing")):
        probe = probes(box, {"ARKGPU_REGION_DIR": region})
        assert probe.ask("alloc alloc 4096") == "oom"
        assert probe.ask("launch kernel 10") == "err 800"
        assert "refused" in probe.close()


def test_writing_the_limits_from_inside_the_container_fails(
    make_container: Callable[..., FakeContainer], probes: Callable[..., Probe]
) -> None:
    """A container process cannot open its limits file for writing, cannot
    make its read-only mapping writable, cannot map it writable; the limits
    and the cap stay as the node set them."""
    box = make_container(Limits((4 * MiB,), share_bp=3000))
    probe = probes(box)
    attack = probe.ask(f"attack {box.region / 'limits'}")
    assert attack.split() == ["open-rw:denied", "mprotect:denied", "mmap-rw:denied"]
    assert read_limits(box.region) == Limits((4 * MiB,), share_bp=3000)
    assert probe.ask(f"alloc alloc {5 * MiB}") == "oom"
