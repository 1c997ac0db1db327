"""ArkGPU's Helm chart installed on the real node as a user installs it.

The images as an air-gapped cluster pre-loads them (``ctr -n k8s.io images import``):
ArkGPU's, built as ``make image`` builds it, and kube-scheduler's, the control plane's
own binary packed as ``registry.k8s.io/kube-scheduler:<cluster version>``, the name
and tag the chart's default values ask for. The RuntimeClass ``nvidia`` of NVIDIA's
runtime (``manifests/nvidia-runtimeclass.yaml``, applied with kubectl), the node
labelled ``arkgpu.io/gpu=true``, then ``helm install`` with the real helm and the
values file ``deploy/examples/values/cdi-runtimeclass.yaml``, the commands
docs/INSTALL.md shows. The DRA tests install it the same way with their own values file
and node label (``installed_chart``'s arguments, docs/k8s/DRA.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chart.helm import CHART, build_helm, run_helm

from .controlplane import REPO, build_control_plane
from .node_images import PACKER
from .realnode import RealNode

RELEASE = "arkgpu"
NAMESPACE = "arkgpu-system"
VALUES = REPO / "deploy" / "examples" / "values" / "cdi-runtimeclass.yaml"
MANIFESTS = Path(__file__).with_name("manifests")
COMPONENTS = ("scheduler", "extender", "webhook", "node")
"""The chart's parts that run pods (``app.kubernetes.io/component``), DRA off."""
READY_WAIT_S = 300.0
"""Bound for every pod of the chart to be Ready: about 30 s on an idle machine (the node
pod waits for its init container and its first inventory); room for a load of 8."""
IMAGE_BUILD_S = 1500.0
"""Bound of ``make image``'s build (2-6 minutes loaded with the Debian base cached)."""


def build_arkgpu_image(out: Path) -> Path:
    """ArkGPU's image archive, built by ``scripts/imagebuild`` as ``make image`` does."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "imagebuild"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=IMAGE_BUILD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def build_scheduler_image(out: Path, node: RealNode) -> Path:
    """kube-scheduler's image: the control plane's binary (the cluster's version) at
    ``/usr/local/bin/kube-scheduler``, named as the chart's default values name it."""
    version = json.loads(node.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
    binary = build_control_plane() / "kube-scheduler"
    image = f"registry.k8s.io/kube-scheduler:{version.split('+')[0]}"
    dest = "/usr/local/bin/kube-scheduler"
    argv = [sys.executable, str(PACKER), str(out), image, dest, f"{binary}={dest}"]
    subprocess.run(argv, check=True)
    return out


@dataclass(frozen=True)
class Chart:
    """The installed release."""

    node: RealNode
    helm: Path
    components: tuple[str, ...] = COMPONENTS
    """The parts whose pods run on the node (``app.kubernetes.io/component``)."""

    def run(self, *args: str) -> str:
        """``helm args...`` against the node's control plane; its output."""
        result = run_helm(self.helm, *args, kubeconfig=self.node.plane.admin_kubeconfig)
        return result.stdout

    def pods(self) -> list[dict[str, Any]]:
        """The release's pods."""
        got = self.node.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json")
        return list(json.loads(got)["items"])

    def uninstall(self, wait_s: float) -> None:
        """``helm uninstall --wait``, then wait until no pod of the release is left (fails the
        test with their names after ``wait_s``)."""
        self.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
        deadline = time.monotonic() + wait_s
        while self.pods():
            assert time.monotonic() < deadline, [p["metadata"]["name"] for p in self.pods()]
            time.sleep(1.0)


def _ready(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all(s.get("ready") for s in statuses)


def wait_ready(chart: Chart) -> list[dict[str, Any]]:
    """Waits until one pod of each component runs and every pod of the release is Ready."""
    deadline = time.monotonic() + READY_WAIT_S
    while True:
        pods = chart.pods()
        components = {p["metadata"]["labels"].get("app.kubernetes.io/component") for p in pods}
        if components >= set(chart.components) and all(_ready(p) for p in pods):
            return pods
        if time.monotonic() > deadline:
            state = chart.node.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide")
            events = chart.node.kubectl("get", "events", "-n", NAMESPACE)
            raise AssertionError(f"the chart's pods not Ready:\n{state}\n{events[-3000:]}")
        time.sleep(1.0)


@contextmanager
def installed_chart(
    node: RealNode,
    values: Path = VALUES,
    label: str = "true",
    components: tuple[str, ...] = COMPONENTS,
) -> Iterator[Chart]:
    """The chart installed with ``values`` on the node labelled ``arkgpu.io/gpu=<label>``, a
    pod of each of ``components`` and every pod Ready; uninstalled on exit unless a test did."""
    node.kubectl("apply", "-f", str(MANIFESTS / "nvidia-runtimeclass.yaml"))
    node.kubectl("label", "node", node.name, f"arkgpu.io/gpu={label}", "--overwrite")
    chart = Chart(node, build_helm(), components)
    chart.run("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
              "-f", str(values))  # fmt: skip
    try:
        wait_ready(chart)
        yield chart
    finally:
        if RELEASE in chart.run("list", "--namespace", NAMESPACE, "-q"):
            chart.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
