"""Issues 31 and 32 on the DRA path, on the real node: ArkGPU's DRA driver as the chart's
pod, Ready under its probes; a ``firstAvailable`` claim, a claim for two devices, and a
container given two claims, prepared by it for the real kubelet; ``helm uninstall``
leaves no region, CDI spec or plugin socket of the driver.

One node and one chart install for the module (``node_dra``: the chart's DRA DaemonSet,
its plugin registered in the kubelet's plugin registry, the claims' CDI specs read by
containerd; the values file deploy/examples/values/dra-cdi-runtimeclass.yaml); kube-scheduler
allocates the claims from the driver's ResourceSlice, kube-controller-manager makes the
claim of a template. Each case asserts the allocation, the region and CDI device of each
request on the node (one per main request: what one container is given), and the limits
inside the container (the CUDA memory query through the fake driver, under the limiter).
Not in a module with ArkGPU's device plugin: both would serve the same GPUs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from arkgpu.k8s.dra.config import DRIVER_NAME
from arkgpu.limiter.region import read_limits

from .node_chart import NAMESPACE, Chart, build_arkgpu_image, build_scheduler_image
from .node_dra import DRA_SELECTOR, REGIONS, VALUES, chart_with_dra, claim_pod, output
from .node_gpu_pods import MIB, apply_all, get_pod, new_namespace, report
from .node_images import build_workload_image
from .node_pods import POD_WAIT_S
from .realnode import RealNode

IMAGE = "arkgpu.local/e2e-cuda-dra:test"
DRA_PORT = 9404
"""The DRA driver's metrics and probe port (values.yaml: dra.metricsPort)."""
CLEANUP_WAIT_S = 240.0
"""Bound for the kubelet to unprepare the claims of deleted pods (its driver calls) and for
the release's pods to be gone after ``helm uninstall`` (seconds when idle); load 8."""
SLICE_WIPE_WAIT_S = 150.0
"""Bound for the driver's ResourceSlice to be gone after its pod: the driver deletes it at
SIGTERM unless ``helm uninstall`` removed its RBAC first; then the kubelet does, 30 s
(its wiping delay) after the plugin's socket went; room for a load of 8."""
SETUP_TIMEOUT_S = 900
"""pytest-timeout of the module's first case, which runs its set-up: the node's start (when
no module before started it), ArkGPU's image (~35 s when cached, minutes when not), the
scheduler's and workload images and the chart Ready (~30 s idle, up to READY_WAIT_S)."""


def _values_match_the_node(node: RealNode) -> None:
    """The values file names the test node's folders (a moved harness folder fails here)."""
    dra = yaml.safe_load(VALUES.read_text(encoding="utf-8"))["dra"]
    kubelet = node.paths.root / "kubelet"
    assert Path(dra["kubeletRegistryDir"]) == kubelet / "plugins_registry", dra
    assert Path(dra["kubeletPluginsDir"]) == kubelet / "plugins", dra
    assert (Path(dra["cdiDir"]), Path(dra["hostDevDir"])) == (node.gpu.cdi_dir, node.gpu.dev_dir)


@pytest.fixture(scope="module")
def chart(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chart]:
    """ArkGPU's image, kube-scheduler's and the workload image loaded; the chart installed
    with the DRA values, every pod Ready; uninstalled at the end unless a test did."""
    _values_match_the_node(real_node)
    out = tmp_path_factory.mktemp("dra-images")
    real_node.import_image(build_arkgpu_image(out / "arkgpu.tar"))
    real_node.import_image(build_scheduler_image(out / "scheduler.tar", real_node))
    real_node.import_image(build_workload_image(out, IMAGE))
    with chart_with_dra(real_node) as installed:
        yield installed


@pytest.fixture(scope="module")
def node(chart: Chart) -> RealNode:
    """The node ArkGPU's DRA driver serves."""
    return chart.node


@pytest.fixture(scope="module")
def made() -> list[str]:
    """The namespaces the module's cases made (the uninstall case waits until they are gone)."""
    return []


@pytest.fixture
def namespace(node: RealNode, made: list[str]) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the case."""
    name = new_namespace(node)
    made.append(name)
    yield name
    node.kubectl("delete", "namespace", name, "--wait=false")


@pytest.mark.timeout(SETUP_TIMEOUT_S)
def test_the_dra_pod_is_ready_under_its_probes(chart: Chart) -> None:
    """The chart's DRA pod runs on the node labelled ``arkgpu.io/gpu=dra``: the driver's and
    the node runtime's containers have liveness and readiness probes (the driver's on its
    port 9404) and are Ready (the real kubelet ran them); the driver's ``/readyz``, through
    the API server's proxy, answers; its slice is published and its registration socket
    is in the kubelet's registry."""
    node = chart.node
    got = node.kubectl("get", "pods", "-n", NAMESPACE, "-l", DRA_SELECTOR, "-o", "json")
    [pod] = json.loads(got)["items"]
    assert pod["spec"]["nodeName"] == node.name
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    assert set(containers) == {"dra-driver", "node-runtime"}
    for spec in containers.values():
        assert {"livenessProbe", "readinessProbe"} <= set(spec), spec["name"]
    ports = containers["dra-driver"]["ports"]
    assert [(p["name"], p["containerPort"]) for p in ports] == [("dra-metrics", DRA_PORT)]
    assert all(s["ready"] for s in pod["status"]["containerStatuses"]), pod["status"]
    name = pod["metadata"]["name"]
    proxy = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}:{DRA_PORT}/proxy"
    assert node.kubectl("get", "--raw", f"{proxy}/readyz").strip() == "ok"
    assert f"{node.name}-{DRIVER_NAME}" in _slices(node)
    registry = node.paths.root / "kubelet" / "plugins_registry"
    assert any(registry.glob(f"{DRIVER_NAME}*")), list(registry.iterdir())


def _slices(node: RealNode) -> str:
    """The names of the published ResourceSlices."""
    return node.kubectl("get", "resourceslices", "-o", "name")


def _request(memory: str, cores: str, **more: Any) -> dict[str, Any]:
    capacity = {"requests": {"memory": memory, "cores": cores}}
    return {"deviceClassName": DRIVER_NAME, "capacity": capacity, **more}


def _claim_of(node: RealNode, namespace: str, pod: str) -> dict[str, Any]:
    """The pod's one ResourceClaim (made from its template, or named), once allocated."""
    statuses = get_pod(node, namespace, pod)["status"].get("resourceClaimStatuses") or []
    name = statuses[0]["resourceClaimName"] if statuses else pod
    got = json.loads(node.kubectl("get", "resourceclaim", name, "-n", namespace, "-o", "json"))
    assert got["status"]["allocation"], got
    claim: dict[str, Any] = got
    return claim


def _uuids(node: RealNode) -> dict[str, str]:
    """Device name -> GPU UUID from the driver's ResourceSlice."""
    name = f"{node.name}-{DRIVER_NAME}"
    published = json.loads(node.kubectl("get", "resourceslice", name, "-o", "json"))
    return {d["name"]: d["attributes"]["uuid"]["string"] for d in published["spec"]["devices"]}


def _regions_and_cdi(node: RealNode, uid: str) -> tuple[dict[str, Any], list[str]]:
    """The claim's regions by folder name with their limits, and its CDI device names."""
    regions = {p.name: read_limits(p) for p in REGIONS.glob(f"dra-{uid}-*")}
    spec = json.loads((node.gpu.cdi_dir / f"arkgpu-dra-{uid}.json").read_text())
    return regions, [d["name"] for d in spec["devices"]]


def test_a_first_available_claim_gets_its_fitting_subrequest_and_its_limits(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """A template whose first choice (64 GiB) fits no 16 GiB GPU: the claim made from it is
    allocated ``gpu/small`` (3 GiB, 30 cores); its region (named after the main request
    ``gpu``) has that cap and share, its CDI device is injected, and CUDA in the container
    reports 3 GiB."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "first-available"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "big", **_request("64Gi", "50")},
            {"name": "small", **_request("3Gi", "30")},
        ]}]}}},
    }  # fmt: skip
    pod = claim_pod("fa", node, IMAGE, {"resourceClaimTemplateName": "first-available"})
    apply_all(node, namespace, [template, pod], tmp_path / "fa.json")
    seen = report(output(node, namespace, "fa", 2))
    claim = _claim_of(node, namespace, "fa")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["request"] == "gpu/small", result
    regions, cdi = _regions_and_cdi(node, claim["metadata"]["uid"])
    assert list(regions) == [f"dra-{claim['metadata']['uid']}-gpu"], regions
    [limits] = regions.values()
    assert (limits.memory_bytes, limits.share_bp) == ((3072 * MIB,), 3000)
    assert cdi == [f"{claim['metadata']['uid']}-gpu"]
    assert seen.visible == _uuids(node)[result["device"]]
    assert seen.total_bytes == 3072 * MIB


def test_a_claim_for_two_devices_gets_one_region_and_cdi_device_for_the_request(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """One request for two devices (2 GiB, 20 cores each), placed where the scheduler likes
    (both shares may be of one GPU): one region with a cap per distinct GPU (two shares of
    one GPU summed), one CDI device that both results name, and the container sees each of
    the request's GPUs once, in the allocation's order, with its cap."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "two"},
        "spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": _request("2Gi", "20", count=2)},
        ]}},
    }  # fmt: skip
    pod = claim_pod("two", node, IMAGE, {"resourceClaimName": "two"})
    apply_all(node, namespace, [claim, pod], tmp_path / "two.json")
    lines = output(node, namespace, "two", 2)
    seen = report(lines)
    got = _claim_of(node, namespace, "two")
    results = got["status"]["allocation"]["devices"]["results"]
    assert [r["request"] for r in results] == ["gpus", "gpus"], results
    gpus = list(dict.fromkeys(r["device"] for r in results))
    shares = [sum(r["device"] == g for r in results) for g in gpus]
    uid = got["metadata"]["uid"]
    regions, cdi = _regions_and_cdi(node, uid)
    assert list(regions) == [f"dra-{uid}-gpus"], regions
    [limits] = regions.values()
    assert limits.memory_bytes == tuple(n * 2048 * MIB for n in shares), (limits, results)
    assert limits.share_bp == min(shares) * 2000
    assert cdi == [f"{uid}-gpus"]
    assert seen.visible == ",".join(_uuids(node)[g] for g in gpus), (lines, results)
    assert seen.total_bytes == shares[0] * 2048 * MIB, lines


def test_a_container_of_a_two_device_claim_sees_both_gpus(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """The claim above, both results on distinct GPUs (``distinctAttribute``): the container
    lists both GPUs in ``CUDA_VISIBLE_DEVICES`` and its one region caps each at 2 GiB and
    paces both at 20 %; CUDA reports the cap of its first GPU."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "both"},
        "spec": {"devices": {
            "requests": [{"name": "gpus", "exactly": _request("2Gi", "20", count=2)}],
            "constraints": [{"distinctAttribute": f"{DRIVER_NAME}/uuid"}],
        }},
    }  # fmt: skip
    pod = claim_pod("both", node, IMAGE, {"resourceClaimName": "both"})
    apply_all(node, namespace, [claim, pod], tmp_path / "both.json")
    lines = output(node, namespace, "both", 2)
    got = _claim_of(node, namespace, "both")
    results = got["status"]["allocation"]["devices"]["results"]
    uuids = _uuids(node)
    assert report(lines).visible == ",".join(uuids[r["device"]] for r in results), lines
    assert len(set(report(lines).visible.split(","))) == 2, lines
    [limits] = _regions_and_cdi(node, got["metadata"]["uid"])[0].values()
    assert (limits.memory_bytes, limits.share_bp) == ((2048 * MIB, 2048 * MIB), 2000)
    assert report(lines).total_bytes == 2048 * MIB, lines


def _events(node: RealNode, namespace: str, pod: str) -> list[str]:
    """The messages of the pod's events."""
    listed = json.loads(node.kubectl("get", "events", "-n", namespace, "-o", "json"))
    return [
        str(e.get("message", ""))
        for e in listed["items"]
        if e.get("involvedObject", {}).get("name") == pod
    ]


def test_a_container_given_two_claims_is_refused_with_the_reason_in_its_events(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """Two claims of this driver in one container would clash (one environment, one region
    mount): Prepare fails, and the kubelet puts the driver's one line in the pod's events;
    the container never starts."""
    claims = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": _request("1Gi", "10")}]}},
        }
        for name in ("first", "second")
    ]
    pod = claim_pod("greedy", node, IMAGE, {"resourceClaimName": "first"})
    pod["spec"]["resourceClaims"].append({"name": "more", "resourceClaimName": "second"})
    pod["spec"]["containers"][0]["resources"]["claims"].append({"name": "more"})
    apply_all(node, namespace, [*claims, pod], tmp_path / "greedy.json")
    wanted = (
        f"container main would get the {DRIVER_NAME} devices of 2 requests (first/gpu, second/gpu)"
    )
    deadline = time.monotonic() + POD_WAIT_S
    while not any(wanted in m for m in _events(node, namespace, "greedy")):
        assert time.monotonic() < deadline, _events(node, namespace, "greedy")
        time.sleep(1.0)
    statuses = get_pod(node, namespace, "greedy")["status"].get("containerStatuses") or []
    assert not any("running" in s.get("state", {}) for s in statuses), statuses


def _left(node: RealNode) -> dict[str, list[str]]:
    """What of the driver is on the node: claim regions, its CDI specs, plugin sockets."""
    kubelet = node.paths.root / "kubelet"
    plugins = kubelet / "plugins" / DRIVER_NAME
    return {
        "regions": sorted(p.name for p in REGIONS.glob("dra-*")),
        "cdi": sorted(p.name for p in node.gpu.cdi_dir.glob("arkgpu-dra-*")),
        "sockets": sorted(
            str(p)
            for folder in (kubelet / "plugins_registry", plugins)
            if folder.exists()
            for p in folder.iterdir()
            if p.is_socket()
        ),
    }


def test_helm_uninstall_leaves_no_region_cdi_spec_or_plugin_socket(
    chart: Chart, made: list[str]
) -> None:
    """Once the cases' namespaces are gone (the kubelet unprepared their claims: the driver
    removed their regions and CDI specs), ``helm uninstall``: the release's pods are gone,
    no claim region is in the regions folder, no CDI spec of the driver in the CDI folder,
    no socket in the kubelet's plugins_registry or the driver's plugins folder, and the
    driver's ResourceSlice goes (deleted by the driver, or by the kubelet once the plugin
    is gone for its wiping delay)."""
    node = chart.node
    for name in made:
        node.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=true",
                     timeout_s=CLEANUP_WAIT_S)  # fmt: skip
    deadline = time.monotonic() + CLEANUP_WAIT_S
    while _left(node)["regions"] or _left(node)["cdi"]:
        assert time.monotonic() < deadline, _left(node)
        time.sleep(1.0)
    chart.uninstall(CLEANUP_WAIT_S)
    assert _left(node) == {"regions": [], "cdi": [], "sockets": []}
    deadline = time.monotonic() + SLICE_WIPE_WAIT_S
    while f"{node.name}-{DRIVER_NAME}" in _slices(node):
        assert time.monotonic() < deadline, "the driver's ResourceSlice was never removed"
        time.sleep(1.0)
