"""The Helm chart against the real API server: strict validation, install, RBAC, webhooks,
and the real kube-scheduler running the chart's configuration under the chart's account.

No kubelet runs: the chart's Deployments and DaemonSet stay unscheduled and are
not waited for; the objects, the permissions and the configurations are checked.
The installed webhooks select only a namespace label of this test's own (their
failurePolicy is Fail and no webhook pod runs), so other tests sharing the
session's API server are never sent to them.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from arkgpu.k8s import contract
from chart.apiserver import dry_run_create
from chart.helm import CHART, REPO, build_helm, render, run_helm, values_args

from .controlplane import ControlPlane
from .kube_types import filled
from .nodes import GPU

SCHEDULE_TIMEOUT_S = 60.0
"""Generous bound for the scheduler to start, win its lease and try a pod on a loaded machine."""

SELECTOR_LABEL = "e2e.arkgpu.io/chart"
"""The only namespace label the installed webhooks select (set to the release's name)."""


@dataclass(frozen=True)
class Release:
    """The chart installed by helm into the test API server."""

    name: str
    namespace: str

    def object(self, component: str) -> str:
        """Name of one component's objects (the release name holds the chart's name)."""
        return f"{self.name}-{component}"

    def account(self, component: str) -> str:
        """The RBAC user name of one component's ServiceAccount."""
        return f"system:serviceaccount:{self.namespace}:{self.object(component)}"


def _create_namespace(api: k8s.ApiClient, name: str, labels: dict[str, str] | None = None) -> str:
    meta = k8s.V1ObjectMeta(name=name, labels=labels)
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=meta))
    return name


@pytest.fixture(scope="module")
def helm() -> Path:
    return build_helm()


@contextmanager
def installed_release(helm: Path, plane: ControlPlane, workdir: Path) -> Iterator[Release]:
    """``helm install`` with default values but the webhooks' namespace selector and
    gpuPodsOnly; ``helm uninstall`` after, which must remove the webhook configurations."""
    name = f"arkgpu-{uuid.uuid4().hex[:6]}"
    selector = {"matchLabels": {SELECTOR_LABEL: name}}
    values = {"webhook": {"namespaceSelector": selector, "gpuPodsOnly": True}}
    args = ["install", name, str(CHART), "--namespace", name, "--create-namespace"]
    run_helm(helm, *args, *values_args(values, workdir), kubeconfig=plane.admin_kubeconfig)
    yield Release(name, name)
    run_helm(helm, "uninstall", name, "--namespace", name, kubeconfig=plane.admin_kubeconfig)
    with plane.api_client() as api:
        left = k8s.AdmissionregistrationV1Api(api).list_mutating_webhook_configuration()
        assert f"{name}-webhook" not in [filled(w.metadata).name for w in left.items]


@pytest.fixture(scope="module")
def release(
    helm: Path, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    with installed_release(helm, control_plane, tmp_path_factory.mktemp("values")) as installed:
        yield installed


def test_every_manifest_validates_strictly_on_the_api_server(
    helm: Path, api: k8s.ApiClient, tmp_path: Path
) -> None:
    """Server-side dry-run with fieldValidation=Strict of every rendered object (default and
    custom values) and of the pod examples: Kubernetes 1.37's own schemas, unknown or
    duplicate fields refused."""
    namespace = _create_namespace(api, f"chart-dry-{uuid.uuid4().hex[:6]}")
    k8s.CoreV1Api(api).create_namespaced_service_account(  # the example pods' account
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    custom = {
        "extender": {"tls": {"enabled": False}},
        "webhook": {
            "failurePolicy": "Ignore",
            "gpuPodsOnly": True,  # its CEL expression is compiled by the API server
            "objectSelector": {"matchLabels": {"a": "b"}},
        },
        # Not privileged: this API server, like many, runs without --allow-privileged.
        "node": {"hostPID": True, "runtimeClassName": "nvidia"},
    }
    checked = 0
    for values in (None, custom):
        for doc in render(helm, tmp_path, values, release="dry", namespace=namespace):
            status, answer = dry_run_create(api, doc, namespace)
            assert status == 201, f"{doc['kind']}/{doc['metadata']['name']}: {status} {answer}"
            checked += 1
    assert checked >= 2 * 25
    for example in sorted((REPO / "deploy" / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(example.read_text()):
            status, answer = dry_run_create(api, doc, namespace)
            assert status == 201, f"{example.name}: {status} {answer}"
    # The control: strict validation is on, an unknown field is refused.
    stray = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "spec": {}}
    status, answer = dry_run_create(api, stray, namespace)
    assert status == 400
    assert 'strict decoding error: unknown field "spec"' in json.loads(answer)["message"]


def test_helm_dry_run_server_accepts_custom_values(
    helm: Path, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """helm's own server-side dry run, with a user-supplied webhook certificate."""
    values = {"webhook": {"tls": {"existingSecret": "mine", "caPEM": "PEM"}}}
    result = run_helm(
        helm,
        *["install", "dry", str(CHART), "--dry-run=server", "--namespace", "default"],
        *values_args(values, tmp_path),
        kubeconfig=control_plane.admin_kubeconfig,
    )
    assert "STATUS: pending-install" in result.stdout


def test_install_creates_every_object(release: Release, api: k8s.ApiClient) -> None:
    """Deployments, DaemonSet, Services and accounts exist; none waits for a kubelet."""
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    ns = release.namespace
    selector = f"app.kubernetes.io/instance={release.name}"
    deployments = {filled(d.metadata).name for d in apps.list_namespaced_deployment(ns).items}
    assert deployments == {release.object(c) for c in ("extender", "scheduler", "webhook")}
    (daemonset,) = apps.list_namespaced_daemon_set(ns, label_selector=selector).items
    node_selector = filled(filled(daemonset.spec).template.spec).node_selector
    assert node_selector == {contract.LABEL_NODE_ENABLED: "true"}
    services = {filled(s.metadata).name: s for s in core.list_namespaced_service(ns).items}
    assert set(services) == {release.object("extender"), release.object("webhook")}
    assert filled(filled(services[release.object("webhook")].spec).ports)[0].port == 9443
    accounts = {filled(a.metadata).name for a in core.list_namespaced_service_account(ns).items}
    assert {release.object(c) for c in ("extender", "node", "scheduler", "webhook")} <= accounts


def test_webhook_configurations_are_installed_with_the_ca(
    release: Release, api: k8s.ApiClient
) -> None:
    """caBundle is the CA of the installed Secret; the rules; the selector and condition given."""
    secret = k8s.CoreV1Api(api).read_namespaced_secret(
        release.object("webhook-tls"), release.namespace
    )
    ca = base64.b64decode(filled(secret.data)["ca.crt"])
    admission = k8s.AdmissionregistrationV1Api(api)
    mutating = admission.read_mutating_webhook_configuration(release.object("webhook"))
    validating = admission.read_validating_webhook_configuration(release.object("webhook"))
    hooks = (
        (filled(mutating.webhooks)[0], "/mutate", ["CREATE"]),
        (filled(validating.webhooks)[0], "/validate", ["CREATE", "UPDATE"]),
    )
    for hook, path, operations in hooks:
        bundle = hook.client_config.ca_bundle
        assert bundle is not None
        assert base64.b64decode(bundle) == ca
        service = filled(hook.client_config.service)
        assert service.path == path
        assert service.port == 9443
        assert [(r.operations, r.resources) for r in filled(hook.rules)] == [(operations, ["pods"])]
        assert [c.name for c in filled(hook.match_conditions)] == ["arkgpu-pods"]
        assert hook.failure_policy == "Fail"
        assert filled(hook.namespace_selector).match_labels == {SELECTOR_LABEL: release.name}


def test_upgrade_keeps_the_generated_certificates(
    helm: Path, release: Release, control_plane: ControlPlane, api: k8s.ApiClient
) -> None:
    """helm upgrade finds the Secrets (lookup) and keeps their CA: webhooks and the
    scheduler keep trusting running pods; the changed value reaches the Deployment."""
    core = k8s.CoreV1Api(api)

    def cas() -> tuple[bytes | str, bytes | str]:
        secrets = [release.object(f"{c}-tls") for c in ("extender", "webhook")]
        read = [filled(core.read_namespaced_secret(s, release.namespace).data) for s in secrets]
        return read[0]["ca.crt"], read[1]["ca.crt"]

    before = cas()
    run_helm(
        helm,
        *["upgrade", release.name, str(CHART), "--namespace", release.namespace],
        *["--reuse-values", "--set", "scheduler.verbosity=3"],
        kubeconfig=control_plane.admin_kubeconfig,
    )
    assert cas() == before
    hook = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(
        release.object("webhook")
    )
    assert filled(hook.webhooks)[0].client_config.ca_bundle == before[1]
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(
        release.object("scheduler"), release.namespace
    )
    pod_spec = filled(filled(deployment.spec).template.spec)
    assert "--v=3" in filled(pod_spec.containers[0].command)


def test_selected_namespace_sends_gpu_pods_to_the_webhook(
    release: Release, api: k8s.ApiClient
) -> None:
    """The API server calls the installed webhook: with no webhook pod running and
    failurePolicy Fail, a GPU pod in a selected namespace is refused, naming the
    webhook; a CPU pod there is not sent to it (gpuPodsOnly's matchConditions)."""
    namespace = _create_namespace(
        api, f"chart-hooked-{uuid.uuid4().hex[:6]}", {SELECTOR_LABEL: release.name}
    )
    core = k8s.CoreV1Api(api)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )

    def pod(name: str, limits: dict[str, str] | None) -> k8s.V1Pod:
        resources = k8s.V1ResourceRequirements(limits=limits)
        main = k8s.V1Container(name="main", image="never-pulled", resources=resources)
        return k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1PodSpec(containers=[main])
        )

    created = core.create_namespaced_pod(namespace, pod("cpu", {"cpu": "1"}))
    assert filled(created.spec).scheduler_name == "default-scheduler"
    hami = (("mig", {"nvidia.com/mig-1g.10gb": "1"}), ("priority", {"nvidia.com/priority": "0"}))
    for name, limits in (
        ("gpu", {GPU: "1"}),
        ("cores", {contract.RESOURCE_GPUCORES: "30"}),
        *hami,  # refused by the contract: they must reach the webhook too
    ):
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(namespace, pod(name, limits))
        assert "pods.mutate.arkgpu.io" in str(refused.value.body)


RBAC_CASES = [
    # (component, verb, resource, subresource, name, namespaced, allowed)
    ("extender", "create", "pods", "binding", "", True, True),
    ("extender", "patch", "pods", "", "", True, True),
    ("extender", "watch", "nodes", "", "", False, True),
    ("extender", "delete", "nodes", "", "", False, False),
    ("extender", "patch", "nodes", "", "", False, False),
    ("extender", "delete", "pods", "", "", True, False),
    ("extender", "get", "secrets", "", "", True, False),
    ("node", "patch", "nodes", "", "gpu-1", False, True),
    ("node", "patch", "pods", "", "", True, False),  # the device plugin writes no pod
    ("node", "get", "pods", "", "", True, True),
    ("node", "list", "pods", "", "", False, True),
    ("node", "list", "nodes", "", "", False, False),
    ("node", "delete", "nodes", "", "gpu-1", False, False),
    ("node", "create", "pods", "binding", "", True, False),
    ("webhook", "list", "nodes", "", "", False, True),
    ("webhook", "patch", "pods", "", "", True, False),
    ("webhook", "get", "secrets", "", "", True, False),
    ("scheduler", "create", "pods", "binding", "", True, True),
    ("scheduler", "update", "leases", "", contract.SCHEDULER_NAME, True, True),
    ("scheduler", "update", "leases", "", "kube-controller-manager", True, False),
    ("scheduler", "delete", "nodes", "", "", False, False),
]


@pytest.mark.parametrize(
    ("component", "verb", "resource", "subresource", "name", "namespaced", "allowed"),
    RBAC_CASES,
)
def test_rbac_as_the_api_server_decides(
    release: Release,
    api: k8s.ApiClient,
    component: str,
    verb: str,
    resource: str,
    subresource: str,
    name: str,
    namespaced: bool,
    allowed: bool,
) -> None:
    """SubjectAccessReview for each account: what it needs, and what it must not do."""
    group = "coordination.k8s.io" if resource == "leases" else ""
    attributes = k8s.V1ResourceAttributes(
        verb=verb,
        group=group,
        resource=resource,
        subresource=subresource or None,
        name=name or None,
        namespace=release.namespace if namespaced else None,
    )
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{release.namespace}"]
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(
            user=release.account(component),
            groups=[*groups, "system:authenticated"],
            resource_attributes=attributes,
        )
    )
    answer = k8s.AuthorizationV1Api(api).create_subject_access_review(review)
    status = filled(answer.status)
    assert status.allowed is allowed, status.reason
