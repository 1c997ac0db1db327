"""The DRA driver on the real control plane: kube-scheduler shares one GPU among claims.

``arkgpu dra-driver run`` (the real command, GPUs from the fake libnvidia-ml)
publishes a node's ResourceSlice; ResourceClaims asking for ``memory`` and
``cores`` are allocated by the stock kube-scheduler 1.37 (consumable capacity is
beta and on by default since 1.36: no feature gate is passed). No kubelet and no
controller manager run here: pods are deleted with grace 0, and the test does
what the resourceclaim controller would do when a claim is deleted (drop its
finalizer).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.utils import parse_quantity

from arkgpu.k8s.dra.claims import parse_qos
from arkgpu.k8s.dra.config import DRIVER_NAME
from arkgpu.limiter import native, read_limits
from k8s.dra import kubelet
from k8s.dra.test_health import get, metric

from .controlplane import REPO, ControlPlane
from .kube_types import body as json_body
from .kube_types import filled
from .nodes import TEST_LABEL, create_gpu_node, wait_for

GPU_MIB = 16_384
"""Memory of the one fake GPU of the test node."""


def read_raw(call: Any, *args: Any) -> Any:
    """The JSON of a ``ResourceV1Api`` read (None on 404)."""
    try:
        return json.loads(call(*args, _preload_content=False).data)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def ensure_device_class(api: k8s.ApiClient) -> None:
    """Create deploy/dra's DeviceClass unless another test of the session did."""
    deviceclass = yaml.safe_load((REPO / "deploy/dra/deviceclass.yaml").read_text())
    try:
        k8s.ResourceV1Api(api).create_device_class(deviceclass, _preload_content=False)
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise


@pytest.fixture
def node_dir() -> Iterator[Path]:
    """The node's kubelet, regions and CDI folders (a short path: Unix sockets)."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-dra-e2e-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def probe_port() -> int:
    """A free TCP port for the driver's /healthz, /readyz and /metrics."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def dra_node(
    api: k8s.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
    node_dir: Path,
    probe_port: int,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A node with one 16 GiB fake GPU and ``arkgpu dra-driver run`` publishing it."""
    ensure_device_class(api)
    node = f"dra-{uuid.uuid4().hex[:8]}"
    create_gpu_node(api, node, 0)
    config = tmp_path / "dra.toml"
    config.write_text(
        f'node_name = "{node}"\nkubeconfig = "{control_plane.admin_kubeconfig}"\nresync_s = 1\n'
        f'registry_dir = "{node_dir}/registry"\nplugin_dir = "{node_dir}/plugin"\n'
        f'regions_dir = "{node_dir}/regions"\ncdi_dir = "{node_dir}/cdi"\n'
        f'dev_dir = "{node_dir}/dev"\npreload_file = "{node_dir}/preload/ld.so.preload"\n'
        f'listen_address = "127.0.0.1"\nport = {probe_port}\n'
    )
    (node_dir / "dev").mkdir()  # the fake GPU's device nodes (Prepare checks they exist)
    for name in ("nvidia0", "nvidiactl"):
        (node_dir / "dev" / name).touch()
    env = native.container_env(None, tmp_path / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="1", FAKEGPU_MEM_MIB=str(GPU_MIB))
    log = (tmp_path / "driver.log").open("wb")
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
            driver.kill()
        driver.wait(timeout=30)
        log.close()


def _claim(name: str, memory: str, cores: str) -> dict[str, Any]:
    request = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": DRIVER_NAME,
            "capacity": {"requests": {"memory": memory, "cores": cores}},
        },
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def _pod(name: str, node: str, claim: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "registry.invalid/arkgpu-e2e:never-pulled",
        "resources": {"claims": [{"name": "gpu"}]},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {TEST_LABEL: node},
            "containers": [container],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        },
    }


class Cluster:
    """The test's claims and pods in one namespace."""

    def __init__(self, api: k8s.ApiClient, namespace: str, node: str) -> None:
        self.core = k8s.CoreV1Api(api)
        self.resource = k8s.ResourceV1Api(api)
        self.namespace, self.node = namespace, node

    def submit(self, name: str, memory: str, cores: str) -> None:
        """A claim ``name`` and a pod ``name`` using it."""
        claim = json_body(_claim(name, memory, cores))
        self.resource.create_namespaced_resource_claim(self.namespace, claim)
        self.core.create_namespaced_pod(self.namespace, json_body(_pod(name, self.node, name)))

    def allocation(self, name: str) -> dict[str, Any] | None:
        """The claim's one allocated device result, once kube-scheduler wrote it."""
        claim = read_raw(self.resource.read_namespaced_resource_claim, name, self.namespace)
        results = (claim or {}).get("status", {}).get("allocation", {}).get("devices", {})
        found = results.get("results") or []
        return found[0] if found else None

    def unschedulable(self, name: str) -> str | None:
        """The scheduler's message once the pod is marked unschedulable."""
        pod = self.core.read_namespaced_pod(name, self.namespace)
        for condition in filled(pod.status).conditions or []:
            if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                return str(condition.message)
        return None

    def remove(self, name: str) -> None:
        """Delete the pod (grace 0: no kubelet) and the claim (finalizer dropped)."""
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        self.resource.delete_namespaced_resource_claim(name, self.namespace)
        self.resource.patch_namespaced_resource_claim(
            name, self.namespace, {"metadata": {"finalizers": None}}
        )


def _consumed(result: dict[str, Any]) -> tuple[int, int]:
    """(memory MiB, cores) a result consumed."""
    used = result["consumedCapacity"]
    memory = int(parse_quantity(used["memory"])) >> 20  # type: ignore[no-untyped-call]
    return memory, int(parse_quantity(used["cores"]))  # type: ignore[no-untyped-call]


def test_claims_share_one_gpu_up_to_its_capacity_and_free_it_when_deleted(
    api: k8s.ApiClient,
    namespace: str,
    dra_node: tuple[str, subprocess.Popen[bytes]],
    node_dir: Path,
    probe_port: int,
) -> None:
    """Two claims on one 16 GiB GPU; a third that would pass its memory waits, then fits.
    The driver's probes: live, unready until the kubelet registers it, then ready."""
    node, driver = dra_node
    resource = k8s.ResourceV1Api(api)
    name = f"{node}-{DRIVER_NAME}"
    published = wait_for(lambda: read_raw(resource.read_resource_slice, name), 60, "our slice")
    [device] = published["spec"]["devices"]
    assert device["allowMultipleAllocations"] is True
    # kube-apiserver drops fields of a disabled feature gate: these show it is on.
    assert device["capacity"]["cores"]["requestPolicy"]["validRange"]["step"] == "5"
    assert device["attributes"]["uuid"] == {"string": "GPU-fake-0"}
    memory = parse_quantity(device["capacity"]["memory"]["value"])  # type: ignore[no-untyped-call]
    assert memory == GPU_MIB << 20

    cluster = Cluster(api, namespace, node)
    cluster.submit("a", "6Gi", "50")
    cluster.submit("b", "5000Mi", "28")  # rounded up to the policy's steps: 5120Mi, 30
    first = wait_for(lambda: cluster.allocation("a"), 60, "claim a allocated")
    second = wait_for(lambda: cluster.allocation("b"), 60, "claim b allocated")
    assert first["device"] == second["device"] == device["name"]
    assert first["driver"] == DRIVER_NAME
    assert first["pool"] == node
    assert first["shareID"] != second["shareID"]
    assert _consumed(first) == (6144, 50)
    assert _consumed(second) == (5120, 30)
    unready = wait_for(
        lambda: got if (got := get(probe_port, "/readyz"))[1].startswith("not reg") else None,
        30,
        "/readyz waiting for the kubelet's registration",
    )
    assert unready[0] == 503
    assert get(probe_port, "/healthz") == (200, "ok\n")
    _prepare_through_the_kubelet_plugin(cluster, node_dir, "b", second)
    assert get(probe_port, "/readyz") == (200, "ok\n")
    assert metric(probe_port, "arkgpu_dra_driver_prepared_claims_total") == 1
    assert metric(probe_port, "arkgpu_dra_driver_unprepared_claims_total") == 1
    assert metric(probe_port, "arkgpu_dra_driver_devices") == 1

    cluster.submit("c", "6Gi", "10")  # 6144 + 5120 + 6144 > 16384 MiB
    reason = wait_for(lambda: cluster.unschedulable("c"), 60, "pod c unschedulable")
    assert "cannot allocate all claims" in reason
    assert cluster.allocation("c") is None

    cluster.remove("a")
    third = wait_for(lambda: cluster.allocation("c"), 90, "claim c allocated after a is gone")
    assert _consumed(third) == (6144, 10)
    assert _consumed(second)[0] + _consumed(third)[0] <= GPU_MIB

    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=30) == 0
    assert read_raw(resource.read_resource_slice, name) is None


def _prepare_through_the_kubelet_plugin(
    cluster: Cluster, node_dir: Path, name: str, result: dict[str, Any]
) -> None:
    """The emulated kubelet registers the driver's plugin, prepares and unprepares claim
    ``name``: its region has the consumed memory as cap and cores as share."""
    plugin = kubelet.register(node_dir / "registry")
    claim = read_raw(cluster.resource.read_namespaced_resource_claim, name, cluster.namespace)
    ref = (cluster.namespace, name, claim["metadata"]["uid"])
    prepared = kubelet.prepare(plugin, [ref]).claims[ref[2]]
    assert prepared.error == ""
    [device] = prepared.devices
    assert device.device_name == result["device"]
    assert device.share_id == result["shareID"]
    region = node_dir / "regions" / f"dra-{ref[2]}-gpu"
    limits = read_limits(region)
    memory_mib, cores = _consumed(result)
    assert limits.memory_bytes[0] == memory_mib << 20
    assert limits.share_bp == cores * 100
    assert json.loads((region / "pod.json").read_text())["kind"] == "be"
    assert kubelet.unprepare(plugin, [ref]).claims[ref[2]].error == ""
    assert not region.exists()


@pytest.mark.parametrize("name", ["claimtemplate-lc.yaml", "claimtemplate-be.yaml"])
def test_the_example_claim_templates_are_accepted_and_their_config_parses(
    api: k8s.ApiClient, namespace: str, name: str
) -> None:
    """kube-apiserver validates and stores each example; the driver reads its config."""
    body = yaml.safe_load((REPO / "deploy/dra" / name).read_text())
    resource = k8s.ResourceV1Api(api)
    resource.create_namespaced_resource_claim_template(namespace, body, _preload_content=False)
    stored = read_raw(
        resource.read_namespaced_resource_claim_template, body["metadata"]["name"], namespace
    )
    [config] = stored["spec"]["spec"]["devices"]["config"]
    qos = parse_qos(config["opaque"]["parameters"], name)
    assert qos.kind == ("lc" if "lc" in name else "be")
    if qos.kind == "lc":
        assert qos.target_ms > 0
