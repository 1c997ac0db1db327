"""The real node: a real kubelet and containerd run pods whose containers get the fake GPU by CDI.

The node (``realnode``) is joined to a control plane of its own; the stand-in for
NVIDIA's device plugin in CDI mode (``node_cdi_plugin``) advertises replicas of
fake GPU 0 and answers Allocate with the CDI id of the GPU; containerd applies
the fake driver's spec (``node_fakegpu``). Images come from OCI archives, no registry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .node_cdi_plugin import serving_cdi_plugin
from .node_gpu_pods import new_namespace
from .node_images import WORKLOAD_IMAGE, build_workload_image
from .node_pods import POD_WAIT_S, apply_manifest, wait_succeeded
from .realnode import RealNode

MIB = 1 << 20


@pytest.fixture(scope="module")
def cdi_node(
    real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RealNode, str]]:
    """The node with the workload image loaded and the stand-in CDI plugin registered."""
    real_node.import_image(build_workload_image(tmp_path_factory.mktemp("images")))
    with serving_cdi_plugin(real_node.gpu, gpu_index=0, replicas=4) as resource:
        deadline = time.monotonic() + POD_WAIT_S
        while _allocatable(real_node, resource) < 4:
            assert time.monotonic() < deadline, f"{resource} never reached the node's allocatable"
            time.sleep(0.5)
        yield real_node, resource


@pytest.fixture
def node_namespace(cdi_node: tuple[RealNode, str]) -> str:
    """A fresh namespace; kube-controller-manager creates its ``default`` ServiceAccount."""
    node, _ = cdi_node
    return new_namespace(node, "rn")


def _allocatable(node: RealNode, resource: str) -> int:
    got = json.loads(node.kubectl("get", "node", node.name, "-o", "json"))
    return int(got["status"].get("allocatable", {}).get(resource, "0"))


def _gpu_pod(name: str, resource: str, script: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "resources": {"limits": {resource: "1"}},
                }
            ],
        },
    }


def test_node_is_ready_on_the_vm_address(real_node: RealNode) -> None:
    """kubelet registered the node with the interface's address, and it is Ready."""
    got = json.loads(real_node.kubectl("get", "node", real_node.name, "-o", "json"))
    addresses = {a["type"]: a["address"] for a in got["status"]["addresses"]}
    assert addresses["InternalIP"] == real_node.ip
    assert not real_node.ip.startswith("127.")
    ready = [c for c in got["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"


def test_a_pod_sees_the_fake_gpu_through_cdi(
    cdi_node: tuple[RealNode, str], node_namespace: str, tmp_path: Path
) -> None:
    """A pod from a local image runs in a real container: the CDI spec gave it /dev/nvidia0
    (NVIDIA's major 195) and the fake driver, whose memory query reports the node's GPU."""
    node, resource = cdi_node
    script = (
        "set -e; test -c /dev/nvidia0; test -c /dev/nvidiactl; test -c /dev/nvidia-uvm; "
        "echo info | arkgpu-cubench script; echo nvml | arkgpu-cubench script"
    )
    apply_manifest(node, node_namespace, _gpu_pod("sees-gpu", resource, script), tmp_path)
    lines = wait_succeeded(node, node_namespace, "sees-gpu").split()
    free, total = int(lines[0]), int(lines[1])
    assert total == node.gpu.config.memory_mib * MIB
    assert 0 < free <= total
    assert int(lines[2]) == node.gpu.config.memory_mib * MIB  # NVML's total, the same GPU


def _share_between(samples: dict[str, list[int]], start: int, end: int) -> float:
    """The busy share of one run's samples between ``start`` and ``end`` (monotonic ns)."""
    times, busy = samples["t_ns"], samples["busy_at"]
    inside = [i for i, t in enumerate(times) if start <= t <= end]
    first, last = inside[0], inside[-1]
    return (busy[last] - busy[first]) / max(times[last] - times[first], 1)


def test_two_containers_on_one_gpu_contend(
    cdi_node: tuple[RealNode, str], node_namespace: str, tmp_path: Path
) -> None:
    """Two pods on GPU 0, each launching 2 ms kernels back to back: the fake GPU's state is
    shared by their containers, so while both run each gets about half the device (each
    would get all of it if each container had a GPU of its own)."""
    node, resource = cdi_node
    for name in ("load-a", "load-b"):
        apply_manifest(
            node, node_namespace, _gpu_pod(name, resource, "arkgpu-cubench load 10 2000"), tmp_path
        )
    runs = [json.loads(wait_succeeded(node, node_namespace, n)) for n in ("load-a", "load-b")]
    assert all(r["error"] == 0 for r in runs)
    start = max(r["t_ns"][0] for r in runs)
    end = min(r["t_ns"][-1] for r in runs)
    assert end - start > 2e9, "the two pods did not run at the same time for 2 s"
    shares = [_share_between(r, start, end) for r in runs]
    assert all(s < 0.8 for s in shares), shares
    assert 0.5 < sum(shares) < 1.1, shares
