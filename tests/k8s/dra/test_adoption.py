"""The node runtime (a real ``arkgpu node run``) adopts a region the DRA plugin prepared."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from arkgpu.limiter import native

from . import kubelet
from .test_plugin import Claims, allocated_claim, start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics(port: int, runtime: subprocess.Popen[str], want: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while want not in text:
        assert runtime.poll() is None, "the node runtime exited"
        assert time.monotonic() < deadline, f"no {want!r} in /metrics:\n{text}"
        time.sleep(0.3)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            continue
    return text


@pytest.mark.timeout(120)
def test_the_node_runtime_adopts_the_prepared_lc_container_with_its_cap(
    workdir: Path,
) -> None:
    """After Prepare, the runtime reports the container as LC on GPU 0 with the 6 GiB cap."""
    server, plugin = start(workdir, Claims(allocated_claim()))
    try:
        assert kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"].error == ""
    finally:
        server.stop(None)
    env = native.container_env(None, workdir / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="1", FAKEGPU_MEM_MIB="16384")
    port = _free_port()
    config = workdir / "node.toml"
    config.write_text(f'regions_dir = "{workdir / "regions"}"\nmetrics_port = {port}\n')
    runtime = subprocess.Popen(
        [sys.executable, "-m", "arkgpu", "node", "run", "--config", str(config)],
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        labels = 'container="dra-uid-1-gpu",gpu="0",kind="lc",region="dra-uid-1-gpu"'
        text = _metrics(port, runtime, f"arkgpu_container_memory_cap_bytes{{{labels}}}", 60)
    finally:
        runtime.terminate()
        runtime.communicate(timeout=30)
    assert f"arkgpu_container_memory_cap_bytes{{{labels}}} 6.442450944e+09" in text
    assert f"arkgpu_container_latency_target_seconds{{{labels}}} 0.04" in text
