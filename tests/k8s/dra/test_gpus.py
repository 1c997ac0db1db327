"""The DRA driver's GPU discovery through NVML against the project's fake libnvidia-ml."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from arkgpu.limiter import native

DEVICES = """
import json
from arkgpu.k8s.gpus import NvmlGpus
from arkgpu.k8s.dra.slices import devices
print(json.dumps(devices(NvmlGpus().scan(), 256, 5)))
"""


def test_fake_gpus_become_devices_with_their_nvml_uuid_and_memory(tmp_path: Path) -> None:
    """Two fake 8 GiB GPUs: two devices, UUIDs and memory as NVML reports them."""
    env = native.container_env(None, tmp_path / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="8192")
    done = subprocess.run(
        [sys.executable, "-c", DEVICES],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [d["attributes"]["uuid"]["string"] for d in found] == ["GPU-fake-0", "GPU-fake-1"]
    assert {d["capacity"]["memory"]["value"] for d in found} == {"8192Mi"}
    assert {d["attributes"]["mig"]["bool"] for d in found} == {False}
