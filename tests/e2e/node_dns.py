"""The cluster's DNS on the real node: CoreDNS behind the Service ``kube-dns`` (10.96.0.10).

As kubeadm installs it: the image built by ``scripts/build-node.sh`` (CoreDNS with the
plugins of the Corefile), the objects of ``manifests/coredns.yaml`` applied with
kubectl, the kubelet's ``clusterDNS`` pointing at the Service (``node_runtime``). Pods
then reach Services by name, as the chart's kube-scheduler reaches the extender
(``https://arkgpu-extender.arkgpu-system.svc:8888``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from . import processes
from .node_runtime import NodePaths, import_image

MANIFEST = Path(__file__).with_name("manifests") / "coredns.yaml"


def _available(kubectl: Callable[..., str]) -> bool:
    got = json.loads(kubectl("get", "deployment", "coredns", "-n", "kube-system", "-o", "json"))
    return int(got.get("status", {}).get("availableReplicas") or 0) >= 1


def start_dns(paths: NodePaths, kubectl: Callable[..., str], timeout_s: float) -> None:
    """Imports CoreDNS's image, applies its manifest and waits until it answers its
    readiness probe (the Deployment available); raises with its pods' state otherwise."""
    import_image(paths, paths.bin_dir.parent / "images" / "coredns.tar")
    kubectl("apply", "-f", str(MANIFEST))
    deadline = time.monotonic() + timeout_s
    while not _available(kubectl):
        if time.monotonic() > deadline:
            pods = kubectl("get", "pods", "-n", "kube-system", "-o", "wide")
            raise processes.ControlPlaneError(
                f"CoreDNS not available in {timeout_s:.0f} s:\n{pods}"
            )
        time.sleep(0.5)
