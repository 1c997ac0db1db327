"""GPU pods for ArkGPU's device plugin on the real node, and what their containers report.

A pod is made as the webhook and the extender leave a HAMi-style pod: the
assignment annotation (one GPU, a memory cap and a share) and ``nodeName``. Its
containers print ``CUDA_VISIBLE_DEVICES`` and then the CUDA memory query
(``arkgpu-cubench script``: ``free total``) through the fake driver, under the
limiter, and sleep so that the region can be read while they run. No service
account token is mounted: starting the container needs nothing from the API server
but what the device plugin asks.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, PodAssignment
from arkgpu.k8s.deviceplugin.allocating import OWNER_KEY, REGION_PREFIX
from arkgpu.k8s.deviceplugin.containers import POD_FILE
from arkgpu.limiter.region import Limits, read_limits

from .node_host import DATA_ROOT
from .node_pods import POD_WAIT_S
from .realnode import RealNode

MIB = 1 << 20
REGIONS = DATA_ROOT / "arkgpu" / "regions"
"""Where node_arkgpu's plugin keeps its regions."""
REPORT = "echo \"$CUDA_VISIBLE_DEVICES\"; printf 'info\\n' | arkgpu-cubench script"
"""Shell lines printing the container's GPUs and its CUDA memory query (``free total``)."""


@dataclass(frozen=True)
class Report:
    """What a container printed: its visible GPUs and the total memory CUDA reports."""

    visible: str
    total_bytes: int


def gpu_container(name: str, script: str, image: str) -> dict[str, Any]:
    """A container holding one ``nvidia.com/gpu`` device, running ``script`` in ``/bin/sh``."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", script],
        "resources": {"limits": {contract.RESOURCE_GPU: "1"}},
    }


def gpu_pod(
    name: str, node: RealNode, gpu: int, cap_mib: int, share_bp: int, image: str
) -> dict[str, Any]:
    """A pod placed on ``gpu`` with ``cap_mib`` and ``share_bp``; its container reports and
    sleeps (add or change containers in the returned manifest)."""
    assignment = PodAssignment(
        node.name, (AssignedGpu(gpu, node.gpu.uuid(gpu), cap_mib, share_bp),)
    )
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
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [gpu_container("main", f"{REPORT}; exec sleep 600", image)],
        },
    }


def new_namespace(node: RealNode, prefix: str = "cases") -> str:
    """A fresh namespace ``<prefix>-<hex>``, once kube-controller-manager has created its
    ``default`` ServiceAccount."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:8]}"
    node.kubectl("create", "namespace", namespace)
    deadline = time.monotonic() + POD_WAIT_S
    while "default" not in node.kubectl("get", "serviceaccounts", "-n", namespace, "-o", "name"):
        assert time.monotonic() < deadline, (
            "no default ServiceAccount: is kube-controller-manager up?"
        )
        time.sleep(0.5)
    return namespace


def apply_all(node: RealNode, namespace: str, pods: list[dict[str, Any]], path: Path) -> None:
    """Creates ``pods`` with one ``kubectl apply -f`` of a ``v1 List`` (in the file's order)."""
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    node.kubectl("apply", "-n", namespace, "-f", str(path))


def get_pod(node: RealNode, namespace: str, name: str) -> dict[str, Any]:
    """The pod as the API server has it."""
    pod: dict[str, Any] = json.loads(
        node.kubectl("get", "pod", name, "-n", namespace, "-o", "json")
    )
    return pod


def wait_output(
    node: RealNode, namespace: str, name: str, lines: int, container: str = "main"
) -> list[str]:
    """Waits until ``container`` has printed ``lines`` lines; them. A failed pod fails."""
    deadline = time.monotonic() + POD_WAIT_S
    while True:
        status = get_pod(node, namespace, name)["status"]
        assert status.get("phase") != "Failed", f"pod {name} failed: {json.dumps(status)[:2000]}"
        try:
            out = node.kubectl("logs", name, "-n", namespace, "-c", container).splitlines()
        except Exception:  # not started yet
            out = []
        if len(out) >= lines:
            return out
        assert time.monotonic() < deadline, f"pod {name}: {out}; {json.dumps(status)[:2000]}"
        time.sleep(0.5)


def report(lines: list[str]) -> Report:
    """The :data:`REPORT` of a container from the first two lines it printed."""
    _free, total = (int(x) for x in lines[1].split())
    return Report(lines[0], total)


def wait_phase(node: RealNode, namespace: str, name: str, phase: str) -> dict[str, Any]:
    """Waits for the pod's phase; its status."""
    deadline = time.monotonic() + POD_WAIT_S
    while True:
        status: dict[str, Any] = get_pod(node, namespace, name)["status"]
        if status.get("phase") == phase:
            return status
        assert time.monotonic() < deadline, f"pod {name} not {phase}: {json.dumps(status)[:2000]}"
        time.sleep(0.5)


def region_of(uid: str) -> tuple[Path, Limits]:
    """The plugin's region whose ``pod.json`` names the pod ``uid``, and its limits."""
    found = []
    for folder in REGIONS.glob(f"{REGION_PREFIX}*/"):
        try:
            owner = json.loads((folder / POD_FILE).read_text()).get(OWNER_KEY)
        except (OSError, ValueError):
            continue
        if owner == uid:
            found.append(folder)
    assert len(found) == 1, f"regions of pod {uid}: {found} in {sorted(REGIONS.iterdir())}"
    return found[0], read_limits(found[0])


def caps_and_share(limits: Limits) -> tuple[tuple[int | None, ...], int]:
    """A region's memory caps (bytes) and share (basis points)."""
    return limits.memory_bytes, limits.share_bp
