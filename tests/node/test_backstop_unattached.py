"""Fail closed: a container whose GPU processes run without the interception library.

Where the library cannot load (an image whose glibc it cannot use, a cleared
``LD_PRELOAD``), a program runs with no cap and no share, however little memory it
takes. Real processes: the runtime (``arkgpu node run``, fake NVML) with the backstop
on; in container "bare", ``arkgpu-fake-escape`` (the fake driver without the library)
holding 64 MiB under a 256 MiB cap; in container "good", the driver client under the
library holding as much.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import FakeContainer
from arkgpu.limiter.region import Limits, read_usage
from arkgpu.node.backstop import EVICT_FILE
from arkgpu.node.pods import PodSpec, write_pod

MIB = 1 << 20


def _container(shared_dir: Path, name: str) -> FakeContainer:
    box = FakeContainer.create(
        shared_dir / "regions" / name, shared_dir / "fakegpu", Limits((256 * MIB,))
    )
    write_pod(box.region, PodSpec(name, "be", 0, "vgg16", 256))
    return box


@pytest.mark.timeout(120)
def test_gpu_processes_without_the_library_are_acted_on_and_library_ones_are_not(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(shared_dir / "native"))
    monkeypatch.setenv("FAKEGPU_CTX_RESERVE_MIB", "0")
    good, bare = _container(shared_dir, "good"), _container(shared_dir, "bare")
    probe = good.popen([str(native.cubench()), "script"])
    assert probe.stdin is not None
    assert probe.stdout is not None
    probe.stdin.write(f"alloc alloc {64 * MIB}\n")
    probe.stdin.flush()
    assert probe.stdout.readline().startswith("ok")
    assert len(read_usage(good.region).processes) == 1
    escape = bare.popen([str(native.build_dir() / "fake" / "arkgpu-fake-escape"), "64", "60"])
    assert escape.stdout is not None
    assert escape.stdout.readline().startswith("escaped")
    config = shared_dir / "node.toml"
    config.write_text(f'regions_dir = "{shared_dir / "regions"}"\nbackstop = "evict"\n')
    env = native.container_env(None, shared_dir / "fakegpu", preload=False)
    runtime = subprocess.Popen(
        [sys.executable, "-m", "arkgpu", "node", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert runtime.stderr is not None
        assert runtime.stderr.readline().startswith("arkgpu node:")
        marker = bare.region / EVICT_FILE
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not marker.exists():
            time.sleep(0.05)
        assert marker.exists(), "the container without the library not caught within 5 s"
        assert "1 GPU processes, 0 under the limiter" in marker.read_text()
        time.sleep(2.0)  # several more checks
        assert not (good.region / EVICT_FILE).exists()
    finally:
        runtime.terminate()
        _, err = runtime.communicate(timeout=30)
        for proc in (probe, escape):
            proc.kill()
            proc.communicate(timeout=10)
    assert err.count("bare: GPU 0: 1 GPU processes, 0 under the limiter") == 1  # once
    assert "good" not in err
