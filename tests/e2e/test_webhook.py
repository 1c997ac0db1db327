"""The admission webhook, called by the real kube-apiserver: GPU pods mutated, bad pods refused.

``arkgpu webhook run`` runs as a real process with a serving certificate signed
by a CA of the test's own, given to the API server in the webhook
configurations' ``caBundle``. The MutatingWebhookConfiguration and
ValidatingWebhookConfiguration are created through the API (failurePolicy Fail,
sideEffects None, admissionReviewVersions v1), scoped by namespaceSelector to the
test's namespace so no other test's pods reach the webhook, and deleted at the end
(they are cluster-scoped). Pods are then created through the API server: what is
stored, or the error it answers, is what is checked.
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from arkgpu.k8s import contract

from . import pki, processes
from .controlplane import ControlPlane, free_port
from .nodes import wait_for

READY_TIMEOUT_S = 120.0
"""The webhook's start (Python, the predictor fitted, the first node list) on a loaded machine."""
ACTIVE_TIMEOUT_S = 30.0
"""The API server picks up a new webhook configuration within a second or two when idle."""
LARGEST_MIB = 81_920
"""Memory of the test node's GPU (an 80 GB GPU); gpumem over any GPU is asked as 10 TiB."""
HUGE_MIB = 10 * 1024 * 1024
DEFAULT_GPUCORES = 50
"""``[defaults] gpucores`` of the test's webhook."""


@dataclass(frozen=True)
class Webhook:
    """The running webhook process and what the API server needs to call it."""

    url: str
    """``https://127.0.0.1:<port>``."""
    ca_bundle: str
    """The CA that signed its certificate, PEM, base64 (a configuration's ``caBundle``)."""
    child: processes.Child


def _write_config(directory: Path, port: int, plane: ControlPlane) -> Path:
    ca = pki.make_ca("arkgpu-webhook-e2e-ca")
    serving = pki.write(pki.issue(ca, "arkgpu-webhook", ips=("127.0.0.1",)), directory, "webhook")
    pki.write(ca, directory, "webhook-ca")
    config = directory / "webhook.toml"
    config.write_text(
        f'tls_cert_file = "{serving.cert}"\ntls_key_file = "{serving.key}"\n'
        f'listen_address = "127.0.0.1"\nport = {port}\n'
        f'kubeconfig = "{plane.admin_kubeconfig}"\n'
        f"[defaults]\ngpucores = {DEFAULT_GPUCORES}\n"
    )
    return config


@pytest.fixture(scope="module")
def webhook(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """``arkgpu webhook run`` on a free loopback port, ready (its first node list is in)."""
    directory = tmp_path_factory.mktemp("webhook")
    port = free_port()
    config = _write_config(directory, port, control_plane)
    argv = [sys.executable, "-m", "arkgpu", "webhook", "run", "--config", str(config)]
    child = processes.start("arkgpu-webhook", argv, directory)
    try:
        context = ssl.create_default_context(cafile=str(directory / "webhook-ca.crt"))
        url = f"https://127.0.0.1:{port}"
        processes.wait_until(
            child, lambda: processes.http_ok(f"{url}/readyz", context), "/readyz", READY_TIMEOUT_S
        )
        bundle = base64.b64encode((directory / "webhook-ca.crt").read_bytes()).decode()
        yield Webhook(url, bundle, child)
    finally:
        processes.stop(child, 10.0)


@pytest.fixture(scope="module")
def inventory_node(api: k8s.ApiClient, webhook: Webhook) -> Iterator[str]:
    """A node (not Ready, so nothing lands on it) publishing one 80 GB GPU, created after the
    webhook started: the webhook learns it through its watch."""
    core = k8s.CoreV1Api(api)
    name = f"webhook-inventory-{uuid.uuid4().hex[:8]}"
    gpu = contract.InventoryGpu(0, f"GPU-{uuid.uuid4()}", "NVIDIA A100-SXM4-80GB", LARGEST_MIB)
    annotations = {contract.ANNOTATION_INVENTORY: contract.NodeInventory((gpu,)).to_json()}
    core.create_node({"metadata": {"name": name, "annotations": annotations}})
    yield name
    core.delete_node(name)


def _hook(name: str, webhook: Webhook, path: str, namespace: str, ops: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": f"{webhook.url}{path}", "caBundle": webhook.ca_bundle},
        "rules": [
            {
                "operations": ops,
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    }


@contextmanager
def registered(api: k8s.ApiClient, webhook: Webhook, namespace: str) -> Iterator[None]:
    """Both webhook configurations, scoped to ``namespace``; deleted on exit."""
    admission = k8s.AdmissionregistrationV1Api(api)
    name = f"arkgpu-e2e-{namespace}"
    mutating = _hook("mutate.arkgpu.io", webhook, "/mutate", namespace, ["CREATE"])
    mutating["reinvocationPolicy"] = "IfNeeded"
    validating = _hook("validate.arkgpu.io", webhook, "/validate", namespace, ["CREATE", "UPDATE"])
    admission.create_mutating_webhook_configuration(
        {"metadata": {"name": name}, "webhooks": [mutating]}
    )
    try:
        admission.create_validating_webhook_configuration(
            {"metadata": {"name": name}, "webhooks": [validating]}
        )
        try:
            _wait_active(api, namespace)
            yield
        finally:
            admission.delete_validating_webhook_configuration(name)
    finally:
        admission.delete_mutating_webhook_configuration(name)


def container(name: str = "main", **limits: str) -> dict[str, Any]:
    """A container asking ``limits`` (gpu, gpumem, gpucores, cpu)."""
    resources = {f"nvidia.com/{k}" if k != "cpu" else k: v for k, v in limits.items()}
    return {
        "name": name,
        "image": "registry.invalid/arkgpu-e2e:never-pulled",
        "resources": {"limits": resources},
    }


def pod_body(name: str, *containers: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """A pod; annotation keywords are ArkGPU's short names (qos, model, latency_target_ms...)."""
    notes = {f"arkgpu.io/{k.replace('_', '-')}": v for k, v in annotations.items()}
    return {
        "metadata": {"name": name, "annotations": notes},
        "spec": {"containers": list(containers)},
    }


def _wait_active(api: k8s.ApiClient, namespace: str) -> None:
    """Dry-run creates until both webhooks answer (a GPU pod mutated, a bad one refused)."""
    core = k8s.CoreV1Api(api)

    def active() -> bool | None:
        probe = core.create_namespaced_pod(
            namespace, pod_body("probe", container(gpu="1")), dry_run="All"
        )
        if probe.spec.scheduler_name != contract.SCHEDULER_NAME:
            return None
        return (
            True
            if _refusal(api, namespace, pod_body("probe", container(gpu="1", gpucores="101")))
            else None
        )

    wait_for(active, ACTIVE_TIMEOUT_S, "webhook configurations active")


def _refusal(api: k8s.ApiClient, namespace: str, body: dict[str, Any]) -> str | None:
    """The API server's message refusing a dry-run create of ``body``; None when it is accepted."""
    try:
        k8s.CoreV1Api(api).create_namespaced_pod(namespace, body, dry_run="All")
    except ApiException as exc:
        refused = exc
    else:
        return None
    assert refused.status == 403, refused.body
    message: str = json.loads(refused.body)["message"]
    return message


def test_gpu_pods_are_mutated_and_cpu_pods_untouched(
    api: k8s.ApiClient, webhook: Webhook, namespace: str
) -> None:
    """A HAMi pod is stored with schedulerName arkgpu-scheduler, qos be and the configured
    gpucores; an LC pod keeps its class; another scheduler is kept; a CPU pod is stored as sent."""
    core = k8s.CoreV1Api(api)
    with registered(api, webhook, namespace):
        hami = core.create_namespaced_pod(
            namespace, pod_body("hami", container(gpu="1", gpumem="4096"))
        )
        lc = core.create_namespaced_pod(
            namespace,
            pod_body(
                "lc",
                container(gpu="1", gpucores="30"),
                qos="lc",
                model="resnet50",
                latency_target_ms="20",
            ),
        )
        other = pod_body("other", container(gpu="1"))
        other["spec"]["schedulerName"] = "volcano"
        other = core.create_namespaced_pod(namespace, other)
        cpu = core.create_namespaced_pod(namespace, pod_body("cpu", container(cpu="1")))
    assert hami.spec.scheduler_name == contract.SCHEDULER_NAME
    assert hami.metadata.annotations == {contract.ANNOTATION_QOS: "be"}
    assert hami.spec.containers[0].resources.limits == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "4096",
        "nvidia.com/gpucores": str(DEFAULT_GPUCORES),
    }
    assert lc.spec.scheduler_name == contract.SCHEDULER_NAME
    assert lc.metadata.annotations[contract.ANNOTATION_QOS] == "lc"
    assert lc.spec.containers[0].resources.limits["nvidia.com/gpucores"] == "30"
    assert other.spec.scheduler_name == "volcano"
    assert cpu.spec.scheduler_name == "default-scheduler"
    assert cpu.metadata.annotations is None
    assert cpu.spec.containers[0].resources.limits == {"cpu": "1"}


BAD_PODS = [
    (
        pod_body("cores", container(gpu="1", gpucores="150")),
        "container 'main': nvidia.com/gpucores is 150, but it is a percentage of one GPU's",
    ),
    (
        pod_body("memory", container(gpu="1", gpumem=str(HUGE_MIB))),
        f"container 'main': nvidia.com/gpumem is {HUGE_MIB} MiB per GPU, more than the largest "
        "GPU in this cluster has (",
    ),
    (
        pod_body("count", container("trainer", gpu="32")),
        "container 'trainer': nvidia.com/gpu is 32, over the 16 GPUs",
    ),
    (
        pod_body("qos", container(gpu="1"), qos="gold"),
        "annotation arkgpu.io/qos: unknown QoS class 'gold': use lc (latency-critical) or be",
    ),
    (
        pod_body("nomodel", container(gpu="1"), qos="lc", latency_target_ms="20"),
        "annotation arkgpu.io/latency-target-ms needs arkgpu.io/model",
    ),
    (
        pod_body("target", container(gpu="1"), model="resnet50", latency_target_ms="fast"),
        "annotation arkgpu.io/latency-target-ms: expected a number above 0 (milliseconds), "
        "got 'fast'",
    ),
    (
        pod_body("model", container(gpu="1"), model="gpt-17", latency_target_ms="20"),
        "annotation arkgpu.io/model: the predictor knows no model 'gpt-17' (known: alexnet,",
    ),
    (
        pod_body("forged", container(cpu="1"), assignment='{"version":1}'),
        "annotation arkgpu.io/assignment is written by ArkGPU",
    ),
]


def test_bad_pods_are_refused_with_readable_reasons(
    api: k8s.ApiClient, webhook: Webhook, inventory_node: str, namespace: str
) -> None:
    """Each bad pod: 403 from the API server, quoting the webhook's reason; nothing stored.
    The assignment annotation, refused on CREATE, is accepted on UPDATE (the extender's bind)."""
    core = k8s.CoreV1Api(api)
    with registered(api, webhook, namespace):
        memory = pod_body("probe", container(gpu="1", gpumem=str(HUGE_MIB)))
        wait_for(lambda: _refusal(api, namespace, memory), ACTIVE_TIMEOUT_S, "node inventory seen")
        for body, reason in BAD_PODS:
            with pytest.raises(ApiException) as caught:
                core.create_namespaced_pod(namespace, body)
            assert caught.value.status == 403
            message = json.loads(caught.value.body)["message"]
            assert 'admission webhook "validate.arkgpu.io" denied the request: ' in message
            assert reason in message, message
        assert core.list_namespaced_pod(namespace).items == []
        core.create_namespaced_pod(namespace, pod_body("placed", container(gpu="1")))
        assignment = {contract.ANNOTATION_ASSIGNMENT: '{"version":1}'}
        patched = core.patch_namespaced_pod(
            "placed", namespace, {"metadata": {"annotations": assignment}}
        )
        assert patched.metadata.annotations[contract.ANNOTATION_ASSIGNMENT] == '{"version":1}'
