"""The project's images on the real node, under ArkGPU's device plugin and the limiter.

The images are built as ``make image`` and ``make cuda-image`` build them (the
image builder, ``scripts/imagebuild``), imported with ``ctr -n k8s.io images
import`` and run by the real kubelet with the chart's container security context
(read-only root file system, every capability dropped, user 65532). The GPU
driver comes from the node through CDI, the limiter through ArkGPU's device
plugin (``node_arkgpu``); each pod is placed as the webhook and the extender leave
a HAMi-style pod (3,000 MiB and 30% of GPU 0).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, PodAssignment

from .controlplane import REPO
from .node_arkgpu import serving_arkgpu_plugin
from .node_gpu_pods import new_namespace
from .node_pods import POD_WAIT_S, apply_manifest, wait_succeeded
from .realnode import RealNode

CAP_MIB = 3000
SHARE_BP = 3000
BUILD_TIMEOUT_S = 1500
"""Bound of one image build (2-6 minutes on a loaded 2-core machine with the base cached)."""


def _build(out: Path, *flags: str) -> str:
    """Builds an image archive at ``out`` as make does; the image's name."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "imagebuild"), *flags, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    with subprocess.Popen(["tar", "-xOf", str(out), "index.json"], stdout=subprocess.PIPE) as tar:
        index = json.load(tar.stdout)  # type: ignore[arg-type]
    return str(index["manifests"][0]["annotations"]["io.containerd.image.name"])


@pytest.fixture(scope="module")
def images_node(
    real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RealNode, str, str]]:
    """The node with ArkGPU's image and the CUDA program image, and ArkGPU's plugin."""
    out = tmp_path_factory.mktemp("project-images")
    arkgpu = _build(out / "arkgpu.tar")
    cuda = _build(out / "cuda.tar", "--cuda-program")
    for archive in ("arkgpu.tar", "cuda.tar"):
        real_node.import_image(out / archive)
    with serving_arkgpu_plugin(real_node):
        yield real_node, arkgpu, cuda


def _pod(node: RealNode, name: str, image: str, args: list[str]) -> dict[str, Any]:
    assignment = PodAssignment(node.name, (AssignedGpu(0, node.gpu.uuid(0), CAP_MIB, SHARE_BP),))
    security = {
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "args": args,
        "securityContext": security,
        "resources": {"limits": {contract.RESOURCE_GPU: "1"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
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
            "containers": [container],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }


def test_the_cuda_program_image_sees_its_cap_and_is_refused_past_it(
    images_node: tuple[RealNode, str, str], tmp_path: Path
) -> None:
    """The CUDA program image (Debian's glibc, no driver of its own) in a real container:
    the memory query reports 3,000 MiB; 3,001 MiB is refused as out of memory."""
    node, _, cuda = images_node
    namespace = new_namespace(node, "img")
    apply_manifest(node, namespace, _pod(node, "info", cuda, ["info"]), tmp_path)
    assert json.loads(wait_succeeded(node, namespace, "info")) == {
        "free_mib": CAP_MIB,
        "total_mib": CAP_MIB,
    }
    apply_manifest(node, namespace, _pod(node, "past", cuda, ["alloc", "3001"]), tmp_path)
    pod = wait_failed(node, namespace, "past")
    assert json.loads(node.kubectl("logs", "past", "-n", namespace)) == {
        "mib": 3001,
        "result": "out_of_memory",
    }
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 2


def wait_failed(node: RealNode, namespace: str, name: str) -> dict[str, Any]:
    """Waits for the pod to fail (a program that exits non-zero); the pod."""
    deadline = time.monotonic() + POD_WAIT_S
    while True:
        pod: dict[str, Any] = json.loads(
            node.kubectl("get", "pod", name, "-n", namespace, "-o", "json")
        )
        phase = pod["status"].get("phase")
        if phase == "Failed":
            return pod
        assert phase != "Succeeded", f"pod {name} succeeded"
        assert time.monotonic() < deadline, f"pod {name} still {phase}"
        time.sleep(0.5)


def test_the_be_workload_in_the_arkgpu_image_runs_at_its_share(
    images_node: tuple[RealNode, str, str], tmp_path: Path
) -> None:
    """``arkgpu workload be`` in ArkGPU's image, as the chart's user with a read-only root:
    over 5 s its busy share is 30 ± 3%."""
    node, arkgpu, _ = images_node
    namespace = new_namespace(node, "img")
    args = ["workload", "be", "--seconds", "5", "--kernel-us", "2000"]
    apply_manifest(node, namespace, _pod(node, "be", arkgpu, args), tmp_path)
    report = json.loads(wait_succeeded(node, namespace, "be"))
    assert abs(report["busy_share"] - SHARE_BP / 10_000) <= 0.03, report
