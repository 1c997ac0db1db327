"""Per-GPU metrics through NVML (the fake libnvidia-ml) from a running ``arkgpu node run``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from arkgpu.limiter import native


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(120)
def test_the_runtime_exports_each_gpus_memory_and_utilisation(tmp_path: Path) -> None:
    """Two fake GPUs of 4 GiB: both appear with their total memory and a utilisation."""
    env = native.container_env(None, tmp_path / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="4096")
    port = _free_port()
    config = tmp_path / "node.toml"
    config.write_text(f'regions_dir = "{tmp_path / "regions"}"\nmetrics_port = {port}\n')
    runtime = subprocess.Popen(
        [sys.executable, "-m", "arkgpu", "node", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert runtime.stderr is not None
        assert runtime.stderr.readline().startswith("arkgpu node:")
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "no /metrics"
                time.sleep(0.2)
    finally:
        runtime.terminate()
        runtime.communicate(timeout=30)
    for gpu in ("0", "1"):
        assert f'arkgpu_gpu_memory_total_bytes{{gpu="{gpu}"}} 4.294967296e+09' in text
        assert f'arkgpu_gpu_utilization_ratio{{gpu="{gpu}"}}' in text
