"""ArkGPU's device plugin on the real kubelet: a container runs under the limiter.

``arkgpu device-plugin run`` runs here as a host process (not yet as the chart's
pod: see docs/studies/real-node.md), with ``device_list_strategy = "cdi"`` so the
GPU reaches the container through the fake driver's CDI spec, as on a node with
the GPU Operator in CDI mode; it finds the pod through the kubelet's PodResources
API and loads the limiter through ``/etc/ld.so.preload``. The pod is created as
the webhook and the extender leave a HAMi-style pod (``nvidia.com/gpu: 1``, 3000
MiB, 30% of GPU 0): the assignment annotation, bound to the node.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, PodAssignment

from .node_arkgpu import serving_arkgpu_plugin
from .node_images import WORKLOAD_IMAGE, build_workload_image
from .node_pods import POD_WAIT_S, apply_manifest, wait_succeeded
from .realnode import RealNode

MIB = 1 << 20
CAP_MIB = 3000
SHARE_BP = 3000


@pytest.fixture(scope="module")
def arkgpu_node(
    real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNode]:
    """The node with the workload image and ArkGPU's device plugin serving it."""
    real_node.import_image(build_workload_image(tmp_path_factory.mktemp("images")))
    with serving_arkgpu_plugin(real_node):
        yield real_node


def _hami_pod(name: str, node: RealNode, script: str) -> dict[str, object]:
    assignment = PodAssignment(node.name, (AssignedGpu(0, node.gpu.uuid(0), CAP_MIB, SHARE_BP),))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {contract.ANNOTATION_ASSIGNMENT: assignment.to_json()},
        },
        "spec": {
            "nodeName": node.name,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "resources": {"limits": {contract.RESOURCE_GPU: "1"}},
                }
            ],
        },
    }


def test_a_container_runs_under_its_memory_cap_and_share(
    arkgpu_node: RealNode, tmp_path: Path
) -> None:
    """Inside the real container: the CUDA memory query reports 3,000 MiB, a second
    allocation of 2,000 MiB is refused as out of memory, and launching 2 ms kernels back to
    back for 5 s keeps the fake GPU busy 30 ± 3% of the time."""
    node = arkgpu_node
    namespace = f"lim-{uuid.uuid4().hex[:8]}"
    node.kubectl("create", "namespace", namespace)
    deadline = time.monotonic() + POD_WAIT_S
    while "default" not in node.kubectl("get", "serviceaccounts", "-n", namespace, "-o", "name"):
        assert time.monotonic() < deadline, "no default ServiceAccount"
        time.sleep(0.5)
    two_gib = 2000 * MIB
    script = (
        f"printf 'info\\nalloc alloc {two_gib}\\nalloc alloc {two_gib}\\n' | arkgpu-cubench script"
        " && arkgpu-cubench load 5 2000"
    )
    apply_manifest(node, namespace, _hami_pod("hami", node, script), tmp_path)
    lines = wait_succeeded(node, namespace, "hami").splitlines()
    free, total = (int(x) for x in lines[0].split())
    assert total == CAP_MIB * MIB
    assert free <= total
    assert lines[1].startswith("ok ")
    assert lines[2] == "oom"
    run = json.loads(lines[3])
    assert run["error"] == 0
    assert abs(run["share"] - SHARE_BP / 10_000) <= 0.03, run["share"]
