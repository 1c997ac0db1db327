"""ArkGPU's device plugin serving the real node, as a host process (not yet the chart's pod).

``device_list_strategy = "cdi"``: the GPU reaches the container through the fake
driver's CDI spec, as on a node with the GPU Operator in CDI mode; the plugin finds
the pod through the kubelet's PodResources API and loads the limiter through
``/etc/ld.so.preload``. Its log is ``<node logs>/device-plugin.log``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from arkgpu.k8s import contract
from arkgpu.k8s.deviceplugin.podresources import PodResourcesClient
from arkgpu.limiter import native

from .node_host import DATA_ROOT
from .realnode import RealNode

REGISTERED = f"registered {contract.RESOURCE_GPU} with the kubelet"
"""The plugin's log line once the kubelet accepted its registration."""
REGISTER_WAIT_S = 120.0
"""Bound for the plugin's devices to reach the node's allocatable (seconds on an idle machine)."""


def _plugin_config(node: RealNode, root: Path, split_count: int) -> str:
    lines = {
        "node_name": node.name,
        "kubeconfig": str(node.plane.admin_kubeconfig),
        "regions_dir": str(root / "regions"),
        "library_path": str(native.stage(root / "native") / "libarkgpu_limiter.so"),
        "preload_file": str(root / "ld.so.preload"),
        "pod_resources_socket": str(node.paths.root / "kubelet" / "pod-resources" / "kubelet.sock"),
        "dev_root": str(node.gpu.dev_dir),
        "device_list_strategy": "cdi",
    }
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in lines.items())
    numbers = f"split_count = {split_count}\ninventory_period_s = 1.0\nkubelet_check_s = 0.5\n"
    return body + numbers + "port = 0\n"


def _kubelet_allocatable(node: RealNode) -> int:
    """The ``nvidia.com/gpu`` devices the kubelet itself holds healthy now (PodResources
    ``GetAllocatableResources``; the Node's status lags it, and after another plugin of this
    session stopped it still shows that plugin's devices)."""
    socket = node.paths.root / "kubelet" / "pod-resources" / "kubelet.sock"
    try:
        return len(PodResourcesClient(socket).allocatable(contract.RESOURCE_GPU))
    except grpc.RpcError:
        return 0


def allocatable_gpus(node: RealNode) -> int:
    """The node's allocatable ``nvidia.com/gpu`` devices."""
    got = json.loads(node.kubectl("get", "node", node.name, "-o", "json"))
    return int(got["status"].get("allocatable", {}).get(contract.RESOURCE_GPU, "0"))


@contextmanager
def serving_arkgpu_plugin(
    node: RealNode, split_count: int = 10
) -> Iterator[subprocess.Popen[bytes]]:
    """``arkgpu device-plugin run`` for the node until it registered and its devices are
    allocatable, in the kubelet and on the Node; stopped on exit. Yields its process."""
    root = DATA_ROOT / "arkgpu"
    root.mkdir(parents=True, exist_ok=True)
    config = root / "plugin.toml"
    config.write_text(_plugin_config(node, root, split_count), encoding="utf-8")
    env = native.container_env(None, node.gpu.state_dir / "state", preload=False)
    env.update(node.gpu.env, FAKEGPU_STATE=str(node.gpu.state_dir / "state"))
    arkgpu = Path(sys.executable).with_name("arkgpu")
    log = node.paths.logs / "device-plugin.log"
    with log.open("wb") as out:
        plugin = subprocess.Popen(
            [str(arkgpu), "device-plugin", "run", "--config", str(config)], env=env, stderr=out
        )
    try:
        deadline = time.monotonic() + REGISTER_WAIT_S
        wanted = node.gpu.config.gpus * split_count
        while (
            REGISTERED not in log.read_text()
            or _kubelet_allocatable(node) < wanted
            or allocatable_gpus(node) < wanted
        ):
            tail = log.read_text()[-3000:]
            assert plugin.poll() is None, f"the device plugin exited:\n{tail}"
            assert time.monotonic() < deadline, f"nvidia.com/gpu never reached the node:\n{tail}"
            time.sleep(0.5)
        yield plugin
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
