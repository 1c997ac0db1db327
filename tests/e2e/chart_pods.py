"""Pods of the chart tests on the real node: namespaces, manifests, regions, diagnoses.

Manifests are files of ``tests/e2e/manifests`` applied with ``kubectl apply -f`` (those
that run ArkGPU's own image get the chart's image first). A GPU pod's region is the
folder of the chart's regions folder whose ``pod.json`` names it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from .node_chart import MANIFESTS, NAMESPACE, Chart
from .node_gpu_pods import new_namespace
from .node_pods import POD_WAIT_S, apply_manifest
from .realnode import RealNode

MIB = 1 << 20
HOST_PATHS = ("/run/arkgpu/regions", "/usr/local/lib/arkgpu", "/run/arkgpu/preload")
"""The chart's default host paths (values.yaml: node.regionsDir, libraryDir, preloadDir)."""
REGIONS = Path(HOST_PATHS[0])
COMPONENT = "app.kubernetes.io/component"


def namespace(node: RealNode) -> str:
    """A fresh namespace ``chart-<hex>``, once its ``default`` ServiceAccount exists."""
    return new_namespace(node, "chart")


def apply(node: RealNode, ns: str, manifest: str) -> None:
    """``kubectl apply -f manifests/<manifest>`` in ``ns``."""
    node.kubectl("apply", "-n", ns, "-f", str(MANIFESTS / manifest))


def apply_image(node: RealNode, ns: str, manifest: str, image: str, out: Path) -> None:
    """Applies ``manifests/<manifest>`` with its containers' image set to ``image``."""
    body = yaml.safe_load((MANIFESTS / manifest).read_text(encoding="utf-8"))
    for container in body["spec"]["containers"]:
        container["image"] = image
    apply_manifest(node, ns, body, out)


def get_pod(node: RealNode, ns: str, name: str) -> dict[str, Any]:
    """The pod as the API server has it."""
    return dict(json.loads(node.kubectl("get", "pod", name, "-n", ns, "-o", "json")))


def region_of(ns: str, name: str) -> str:
    """The region folder the chart's device plugin made for pod ``ns/name``."""
    for description in REGIONS.glob("*/pod.json"):
        pod = json.loads(description.read_text(encoding="utf-8"))
        if (pod.get("namespace"), pod.get("pod")) == (ns, name):
            return description.parent.name
    raise AssertionError(f"no region of {ns}/{name} in {REGIONS}")


def wait_region(ns: str, name: str) -> str:
    """:func:`region_of`, once the device plugin wrote it (at the container's start)."""
    deadline = time.monotonic() + POD_WAIT_S
    while True:
        try:
            return region_of(ns, name)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def regions() -> list[str]:
    """The region folders in the chart's regions folder (its dot files are not regions)."""
    if not REGIONS.exists():
        return []
    return sorted(p.name for p in REGIONS.iterdir() if not p.name.startswith("."))


def component_pod(chart: Chart, component: str) -> dict[str, Any]:
    """The release's (one) pod of ``component``."""
    pods = [p for p in chart.pods() if p["metadata"]["labels"].get(COMPONENT) == component]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def node_pod(chart: Chart) -> str:
    """The name of the release's node pod (device plugin and node runtime)."""
    return str(component_pod(chart, "node")["metadata"]["name"])


def chart_image(chart: Chart) -> str:
    """The image the chart's node pod runs (ArkGPU's, as ``make image`` built it)."""
    return str(component_pod(chart, "node")["spec"]["containers"][0]["image"])


def diagnosis(chart: Chart, ns: str) -> str:
    """For a failure: the pods of ``ns`` and of the release, ``ns``'s events and the node
    pod's last log lines."""
    node = chart.node
    pods = node.kubectl("get", "pods", "-n", ns, "-o", "wide")
    ours = node.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide")
    events = node.kubectl("get", "events", "-n", ns)
    try:
        log = node.kubectl("logs", "-n", NAMESPACE, node_pod(chart), "--all-containers",
                           "--tail=40")  # fmt: skip
    except (AssertionError, RuntimeError) as exc:
        log = f"(no log: {exc})"
    return f"{pods}\n{ours}\n{events[-2000:]}\n{log[-4000:]}"
