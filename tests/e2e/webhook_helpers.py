"""The admission webhook as the end-to-end tests run it: a real process, its certificate, its
configurations registered with the API server (scoped to one namespace), pod bodies."""

from __future__ import annotations

import base64
import json
import ssl
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from arkgpu.k8s import contract

from . import pki, processes
from .controlplane import ControlPlane, free_port
from .kube_types import body as json_body
from .kube_types import filled
from .nodes import wait_for

READY_TIMEOUT_S = 120.0
"""The webhook's start (Python, the predictor fitted, the first node list) on a loaded machine."""
ACTIVE_TIMEOUT_S = 30.0
"""The API server picks up a new webhook configuration within a second or two when idle."""


@dataclass(frozen=True)
class Webhook:
    """The running webhook process and what the API server needs to call it."""

    url: str
    """``https://127.0.0.1:<port>``."""
    ca_bundle: str
    """The CA that signed its certificate, PEM, base64 (a configuration's ``caBundle``)."""
    child: processes.Child


def write_config(directory: Path, port: int, plane: ControlPlane) -> Path:
    ca = pki.make_ca("arkgpu-webhook-e2e-ca")
    serving = pki.write(pki.issue(ca, "arkgpu-webhook", ips=("127.0.0.1",)), directory, "webhook")
    pki.write(ca, directory, "webhook-ca")
    config = directory / "webhook.toml"
    config.write_text(
        f'tls_cert_file = "{serving.cert}"\ntls_key_file = "{serving.key}"\n'
        f'listen_address = "127.0.0.1"\nport = {port}\n'
        f'kubeconfig = "{plane.admin_kubeconfig}"\n'
    )  # no [defaults]: the chart ships none
    return config


def hook_config(
    name: str, webhook: Webhook, path: str, namespace: str, ops: list[str]
) -> dict[str, Any]:
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
    mutating = hook_config("mutate.arkgpu.io", webhook, "/mutate", namespace, ["CREATE"])
    mutating["reinvocationPolicy"] = "IfNeeded"
    validating = hook_config(
        "validate.arkgpu.io", webhook, "/validate", namespace, ["CREATE", "UPDATE"]
    )
    admission.create_mutating_webhook_configuration(
        json_body({"metadata": {"name": name}, "webhooks": [mutating]})
    )
    try:
        admission.create_validating_webhook_configuration(
            json_body({"metadata": {"name": name}, "webhooks": [validating]})
        )
        try:
            wait_active(api, namespace)
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


def wait_active(api: k8s.ApiClient, namespace: str) -> None:
    """Dry-run creates until both webhooks answer (a GPU pod mutated, a bad one refused)."""
    core = k8s.CoreV1Api(api)

    def active() -> bool | None:
        probe = core.create_namespaced_pod(
            namespace, json_body(pod_body("probe", container(gpu="1"))), dry_run="All"
        )
        if filled(probe.spec).scheduler_name != contract.SCHEDULER_NAME:
            return None
        return (
            True
            if refusal(api, namespace, pod_body("probe", container(gpu="1", gpucores="101")))
            else None
        )

    wait_for(active, ACTIVE_TIMEOUT_S, "webhook configurations active")


def refusal(api: k8s.ApiClient, namespace: str, body: dict[str, Any]) -> str | None:
    """The API server's message refusing a dry-run create of ``body``; None when it is accepted."""
    try:
        k8s.CoreV1Api(api).create_namespaced_pod(namespace, json_body(body), dry_run="All")
    except ApiException as exc:
        refused = exc
    else:
        return None
    assert refused.status == 403, refused.body
    assert refused.body is not None
    message: str = json.loads(refused.body)["message"]
    return message


@contextmanager
def running_webhook(plane: ControlPlane, directory: Path) -> Iterator[Webhook]:
    """``arkgpu webhook run`` against ``plane`` on a free loopback port, ready (its first node
    list is in); stopped on exit."""
    port = free_port()
    config = write_config(directory, port, plane)
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
