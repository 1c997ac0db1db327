"""The chart with ``dra.enabled`` against the real API server and kube-scheduler 1.37.

Every rendered DRA object passes server-side strict validation; ``helm install``
creates them; the API server's authorizer gives the driver's account exactly what it
needs; and a claim made from the chart's LC template is allocated by the stock
kube-scheduler through the chart's DeviceClass from a slice the driver's code
publishes. No kubelet and no controller manager run (the DaemonSet stays without
pods; the test drops the claim's finalizer as the resourceclaim controller would).

The DeviceClass is cluster-scoped and fixed (gpu.arkgpu.io); tests/e2e/test_dra.py
creates the same one when missing, so this test removes it before installing and the
uninstall removes the chart's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from arkgpu.k8s import contract
from arkgpu.k8s.dra.claims import parse_qos
from arkgpu.k8s.dra.config import DRIVER_NAME
from arkgpu.k8s.dra.publishing import KubernetesSlices, Publisher
from arkgpu.k8s.dra.slices import devices
from arkgpu.k8s.gpus import AssumedGpus
from chart.apiserver import dry_run_create
from chart.helm import CHART, build_helm, render, run_helm, values_args

from .controlplane import ControlPlane
from .kube_types import body as json_body
from .kube_types import filled
from .nodes import TEST_LABEL, create_gpu_node, wait_for
from .test_dra import read_raw

TIMEOUT_S = 90.0
"""Generous bound for the API server and the scheduler on a loaded 2-core machine."""


@pytest.fixture(scope="module")
def helm() -> Path:
    return build_helm()


@pytest.fixture(scope="module")
def release(
    helm: Path, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``helm install`` with dra.enabled (templates in the release's namespace); uninstalled."""
    name = f"arkgpu-dra-{uuid.uuid4().hex[:6]}"
    with control_plane.api_client() as api:
        resource = k8s.ResourceV1Api(api)
        if read_raw(resource.read_device_class, DRIVER_NAME) is not None:
            resource.delete_device_class(DRIVER_NAME)
            wait_for(
                lambda: read_raw(resource.read_device_class, DRIVER_NAME) is None or None,
                TIMEOUT_S,
                "the old DeviceClass gone",
            )
    # The webhooks select a label no namespace has: this release's never see other tests' pods.
    values = {
        "dra": {"enabled": True},
        "webhook": {"namespaceSelector": {"matchLabels": {"e2e.arkgpu.io/none": name}}},
    }
    workdir = tmp_path_factory.mktemp("values")
    kubeconfig = control_plane.admin_kubeconfig
    args = ["install", name, str(CHART), "--namespace", name, "--create-namespace"]
    run_helm(helm, *args, *values_args(values, workdir), kubeconfig=kubeconfig)
    yield name
    run_helm(helm, "uninstall", name, "--namespace", name, kubeconfig=kubeconfig)


def test_dra_objects_validate_strictly(helm: Path, api: k8s.ApiClient, tmp_path: Path) -> None:
    """Server-side dry-run, strict field validation, of every object dra.enabled adds."""
    namespace = f"chart-dra-{uuid.uuid4().hex[:6]}"
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    values = {"dra": {"enabled": True, "settings": {"device_order": "pack"}}}
    rendered = render(helm, tmp_path, values, release="dry", namespace=namespace)
    added = [d for d in rendered if d["metadata"]["labels"]["app.kubernetes.io/component"] == "dra"]
    kinds = sorted(d["kind"] for d in added)
    assert kinds == sorted(
        ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "DeviceClass"]
        + ["ResourceClaimTemplate"] * 2
        + ["ServiceAccount"]
    )
    for original in added:
        doc = original
        if doc["kind"] == "DeviceClass":  # cluster-scoped and maybe present: check a twin
            doc = {**doc, "metadata": {**doc["metadata"], "name": f"check-{namespace}"}}
        status, answer = dry_run_create(api, doc, namespace)
        assert status == 201, f"{doc['kind']}/{doc['metadata']['name']}: {status} {answer}"


def test_install_creates_the_dra_objects(release: str, api: k8s.ApiClient) -> None:
    """The DaemonSet on arkgpu.io/gpu=dra nodes only; the class; the templates as stored."""
    apps, resource = k8s.AppsV1Api(api), k8s.ResourceV1Api(api)
    selectors = {
        filled(d.metadata).name: filled(filled(d.spec).template.spec).node_selector
        for d in apps.list_namespaced_daemon_set(release).items
    }
    assert selectors == {
        f"{release}-node": {contract.LABEL_NODE_ENABLED: "true"},
        f"{release}-dra": {contract.LABEL_NODE_ENABLED: "dra"},
    }
    stored = read_raw(resource.read_device_class, DRIVER_NAME)
    assert stored["metadata"]["labels"]["app.kubernetes.io/instance"] == release
    kinds = {}
    for name in ("arkgpu-lc-inference", "arkgpu-be-training"):
        template = read_raw(resource.read_namespaced_resource_claim_template, name, release)
        (entry,) = template["spec"]["spec"]["devices"]["config"]
        kinds[name] = parse_qos(entry["opaque"]["parameters"], name).kind
    assert kinds == {"arkgpu-lc-inference": "lc", "arkgpu-be-training": "be"}


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("create", "resourceslices", True),
        ("update", "resourceslices", True),
        ("delete", "resourceslices", True),
        ("get", "resourceclaims", True),
        ("list", "resourceclaims", False),
        ("update", "resourceclaims", False),
        ("create", "deviceclasses", False),
    ],
)
def test_driver_account_as_the_api_server_decides(
    release: str, api: k8s.ApiClient, verb: str, resource: str, allowed: bool
) -> None:
    """SubjectAccessReview for the driver's ServiceAccount; pods only read one at a time
    (Prepare reads a claim's reserved pods), no nodes or secrets."""
    cases = [(verb, "resource.k8s.io", resource, allowed)]
    if allowed:
        cases += [
            (verb, "", "pods", verb == "get"),
            ("list", "", "pods", False),
            ("update", "", "pods", False),
            (verb, "", "nodes", False),
            ("get", "", "secrets", False),
        ]
    for v, group, res, expected in cases:
        namespaced = res in ("resourceclaims", "pods", "secrets")
        attributes = k8s.V1ResourceAttributes(
            verb=v, group=group, resource=res, namespace="default" if namespaced else None
        )
        review = k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user=f"system:serviceaccount:{release}:{release}-dra",
                groups=["system:serviceaccounts", f"system:serviceaccounts:{release}"],
                resource_attributes=attributes,
            )
        )
        answer = k8s.AuthorizationV1Api(api).create_subject_access_review(review)
        status = filled(answer.status)
        assert status.allowed is expected, (v, res, status.reason)


def test_scheduler_allocates_a_claim_of_the_charts_lc_template(
    release: str, api: k8s.ApiClient
) -> None:
    """The chart's DeviceClass selects the driver's devices; the LC template's 4Gi and 30
    cores are consumed from one GPU by the stock kube-scheduler."""
    node = f"chart-dra-{uuid.uuid4().hex[:6]}"
    create_gpu_node(api, node, 0)
    publisher = Publisher(KubernetesSlices(api), node, DRIVER_NAME)
    publisher.reconcile(devices(AssumedGpus(2, 16_384).scan(), 256, 5))
    resource, core = k8s.ResourceV1Api(api), k8s.CoreV1Api(api)
    template = read_raw(
        resource.read_namespaced_resource_claim_template, "arkgpu-lc-inference", release
    )
    # The template's requests; its opaque config is left out because this API server then
    # refuses the finalizer removal the cleanup needs (422 "spec: field is immutable").
    requests = template["spec"]["spec"]["devices"]["requests"]
    claim = {"metadata": {"name": node}, "spec": {"devices": {"requests": requests}}}
    resource.create_namespaced_resource_claim(release, json_body(claim))
    core.create_namespaced_service_account(release, json_body({"metadata": {"name": "default"}}))
    pod = {
        "metadata": {"name": node},
        "spec": {
            "nodeSelector": {TEST_LABEL: node},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/never-pulled",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": node}],
        },
    }
    core.create_namespaced_pod(release, json_body(pod))
    try:

        def allocated() -> Any:
            stored = read_raw(resource.read_namespaced_resource_claim, node, release)
            return (stored.get("status") or {}).get("allocation")

        allocation = wait_for(allocated, TIMEOUT_S, "the claim allocated")
        (result,) = allocation["devices"]["results"]
        assert (result["driver"], result["pool"], result["device"]) == (DRIVER_NAME, node, "gpu-0")
        assert result["consumedCapacity"] == {"memory": "4Gi", "cores": "30"}
        bound = wait_for(
            lambda: filled(core.read_namespaced_pod(node, release).spec).node_name,
            TIMEOUT_S,
            "bound",
        )
        assert bound == node
    finally:
        core.delete_namespaced_pod(node, release, grace_period_seconds=0)
        resource.delete_namespaced_resource_claim(node, release)
        drop = [{"op": "remove", "path": "/metadata/finalizers"}]
        resource.patch_namespaced_resource_claim(node, release, drop)
        publisher.withdraw()
