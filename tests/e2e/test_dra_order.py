"""The driver's ``device_order = "pack"`` steers the real kube-scheduler's device choice.

kube-scheduler 1.37's allocator takes the first device in slice order that fits. With
two 100-core GPUs, claims of 60 then 70 cores land on gpu-0 then gpu-1; the driver
(the real ``arkgpu dra-driver run``) then lists gpu-1 (70 used) before gpu-0 (60 used).
A 30-core claim therefore takes gpu-1, the tightest fit, where index order would give
it gpu-0; and a 40-core claim still fits (on gpu-0), where index order would leave
10 and 30 cores free and the claim pending.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client as k8s

from arkgpu.k8s.dra.config import DRIVER_NAME
from arkgpu.limiter import native

from .controlplane import ControlPlane
from .nodes import create_gpu_node, wait_for
from .test_dra import Cluster, ensure_device_class, read_raw

TIMEOUT_S = 60.0


@pytest.fixture
def pack_node(
    api: k8s.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A node with two 16 GiB fake GPUs, its driver in pack order (slice only)."""
    ensure_device_class(api)
    node = f"dra-pack-{uuid.uuid4().hex[:8]}"
    create_gpu_node(api, node, 0)
    config = tmp_path / "dra.toml"
    config.write_text(
        f'node_name = "{node}"\nkubeconfig = "{control_plane.admin_kubeconfig}"\n'
        'resync_s = 0.5\ndevice_order = "pack"\nkubelet_plugin = false\n'
    )
    env = native.container_env(None, tmp_path / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="16384")
    with (tmp_path / "driver.log").open("wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "arkgpu", "dra-driver", "run", "--config", str(config)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield node, driver
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=30)


def _order(api: k8s.ApiClient, node: str) -> list[str] | None:
    found = read_raw(k8s.ResourceV1Api(api).read_resource_slice, f"{node}-{DRIVER_NAME}")
    return None if found is None else [d["name"] for d in found["spec"]["devices"]]


def test_pack_order_gives_the_tightest_gpu_and_keeps_room_for_a_larger_claim(
    api: k8s.ApiClient, namespace: str, pack_node: tuple[str, subprocess.Popen[bytes]]
) -> None:
    node, _ = pack_node
    assert wait_for(lambda: _order(api, node), TIMEOUT_S, "the slice") == ["gpu-0", "gpu-1"]
    cluster = Cluster(api, namespace, node)
    placed = {}
    try:
        for name, cores in (("a", "60"), ("b", "70")):
            cluster.submit(name, "1Gi", cores)
            placed[name] = wait_for(partial(cluster.allocation, name), TIMEOUT_S, name)
        assert [placed[n]["device"] for n in "ab"] == ["gpu-0", "gpu-1"]
        wait_for(lambda: _order(api, node) == ["gpu-1", "gpu-0"] or None, TIMEOUT_S, "pack order")
        for name, cores in (("c", "30"), ("d", "40")):
            cluster.submit(name, "1Gi", cores)
            placed[name] = wait_for(partial(cluster.allocation, name), TIMEOUT_S, name)
        assert [placed[n]["device"] for n in "cd"] == ["gpu-1", "gpu-0"]
    finally:
        for name in placed:
            cluster.remove(name)
