"""The escape backstop: memory allocated past the library, caught through NVML.

Real processes: the runtime (``arkgpu node run`` with NVML, the fake
libnvidia-ml) and ``arkgpu-fake-escape``, which holds fake device memory through
the fake driver's own table (the path a statically linked program takes),
never seen by the interception library.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.region import Limits, create_region
from arkgpu.node.backstop import EVICT_FILE
from arkgpu.node.pods import PodSpec, write_pod


def _escape(env: dict[str, str], region: Path, mib: int) -> subprocess.Popen[str]:
    program = native.build_dir() / "fake" / "arkgpu-fake-escape"
    proc = subprocess.Popen(
        [str(program), str(mib), "60"],
        stdout=subprocess.PIPE,
        text=True,
        env={**env, "ARKGPU_REGION_DIR": str(region)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("escaped")
    return proc


@pytest.mark.timeout(120)
@pytest.mark.parametrize("action", ["kill", "evict"])
def test_an_escape_over_the_cap_is_caught_within_two_seconds(tmp_path: Path, action: str) -> None:
    """1 GiB held past the library by a container capped at 256 MiB: killed (or marked
    for eviction) within 2 s; a container within its cap is left alone."""
    env = native.container_env(None, tmp_path / "fakegpu", preload=False)
    regions = tmp_path / "regions"
    for name in ("greedy", "modest"):
        region = create_region(regions / name, Limits((256 << 20,)))
        write_pod(region, PodSpec(name, "be", 0, "vgg16", 256))
    config = tmp_path / "node.toml"
    config.write_text(  # both escapes run without the library: the cap alone is tested
        f'regions_dir = "{regions}"\nbackstop = "{action}"\nbackstop_grace_s = 1.0\n'
        "backstop_unattached = false\n"
    )
    runtime = subprocess.Popen(
        [sys.executable, "-m", "arkgpu", "node", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert runtime.stderr is not None
    escapes: list[subprocess.Popen[str]] = []
    try:
        assert runtime.stderr.readline().startswith("arkgpu node:")  # GPUs found, loop starts
        escapes.append(_escape(env, regions / "modest", 128))
        escapes.append(_escape(env, regions / "greedy", 1024))
        modest, greedy = escapes
        caught = _wait(greedy, regions / "greedy" / EVICT_FILE, action, time.monotonic() + 2.0)
        assert caught, f"{action}: not caught within 2 s"
        time.sleep(1.0)
        assert modest.poll() is None, "the container within its cap was killed"
        assert not (regions / "modest" / EVICT_FILE).exists()
    finally:
        runtime.terminate()
        _, err = runtime.communicate(timeout=30)
        for proc in escapes:
            proc.kill()
            proc.communicate(timeout=10)
    assert "backstop" in err
    assert "greedy" in err
    assert "modest" not in err


def _wait(proc: subprocess.Popen[str], marker: Path, action: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if action == "kill" and proc.poll() is not None:
            return True
        if action == "evict" and marker.exists():
            return proc.poll() is None  # marked, not killed
        time.sleep(0.05)
    return False
