"""GPU discovery through NVML (nvidia-ml-py) against the project's fake libnvidia-ml."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from arkgpu.limiter import native

DISCOVER = """
import json
from dataclasses import asdict
from arkgpu.node.gpus import discover
print(json.dumps([asdict(g) for g in discover()]))
"""


def test_discovers_every_fake_gpu_with_uuid_memory_and_mig_mode(tmp_path: Path) -> None:
    """Two fake GPUs of 8 GiB: each with its index, UUID, total memory and MIG off."""
    env = native.container_env(None, tmp_path / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="8192")
    done = subprocess.run(
        [sys.executable, "-c", DISCOVER],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    gpus = json.loads(done.stdout)
    assert [g["index"] for g in gpus] == [0, 1]
    assert [g["uuid"] for g in gpus] == ["GPU-fake-0", "GPU-fake-1"]
    assert all(g["memory_mib"] == 8192 and g["mig"] is False for g in gpus)
