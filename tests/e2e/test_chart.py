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
import ssl
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from arkgpu.k8s import contract
from chart.helm import CHART, REPO, Manifest, build_helm, render, run_helm, values_args

from . import processes
from .controlplane import ControlPlane, build_control_plane, free_port
from .nodes import GPU, TEST_LABEL, create_gpu_node, wait_for

SCHEDULE_TIMEOUT_S = 60.0
"""Generous bound for the scheduler to start, win its lease and try a pod on a loaded machine."""

STAND_IN_REASON = "refused by the stand-in extender"
"""What the stand-in extender answers for every node (the pod's FailedScheduling quotes it)."""

SELECTOR_LABEL = "e2e.arkgpu.io/chart"
"""The only namespace label the installed webhooks select (set to the release's name)."""

PATHS = {
    "v1": "/api/v1",
    "apps/v1": "/apis/apps/v1",
    "rbac.authorization.k8s.io/v1": "/apis/rbac.authorization.k8s.io/v1",
    "admissionregistration.k8s.io/v1": "/apis/admissionregistration.k8s.io/v1",
    "batch/v1": "/apis/batch/v1",
}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}
PLURALS = {"ServiceAccount": "serviceaccounts", "Service": "services", "Secret": "secrets"}


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


@pytest.fixture(scope="module")
def release(
    helm: Path, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    """``helm install`` with default values but the webhooks' namespace selector."""
    name = f"arkgpu-{uuid.uuid4().hex[:6]}"
    selector = {"matchLabels": {SELECTOR_LABEL: name}}
    values = {"webhook": {"namespaceSelector": selector, "gpuPodsOnly": True}}
    args = ["install", name, str(CHART), "--namespace", name, "--create-namespace"]
    files = values_args(values, tmp_path_factory.mktemp("values"))
    run_helm(helm, *args, *files, kubeconfig=control_plane.admin_kubeconfig)
    yield Release(name, name)
    run_helm(
        helm, "uninstall", name, "--namespace", name, kubeconfig=control_plane.admin_kubeconfig
    )
    with control_plane.api_client() as api:
        left = k8s.AdmissionregistrationV1Api(api).list_mutating_webhook_configuration()
        assert f"{name}-webhook" not in [w.metadata.name for w in left.items]


def _dry_run_create(api: k8s.ApiClient, doc: Manifest, namespace: str) -> tuple[int, str]:
    """POST ``doc`` with dryRun=All and fieldValidation=Strict: the status and the answer."""
    kind = doc["kind"]
    plural = PLURALS.get(kind, kind.lower() + "s")
    where = doc["metadata"].get("namespace", namespace)
    scope = "" if kind in CLUSTER_SCOPED else f"/namespaces/{where}"
    method, url, headers, body, _ = api.param_serialize(
        method="POST",
        resource_path=f"{PATHS[doc['apiVersion']]}{scope}/{plural}",
        query_params=[("dryRun", "All"), ("fieldValidation", "Strict")],
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=doc,
    )
    response = api.call_api(method, url, headers, body)
    response.read()
    return int(response.status), response.data.decode(errors="replace")


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
            status, answer = _dry_run_create(api, doc, namespace)
            assert status == 201, f"{doc['kind']}/{doc['metadata']['name']}: {status} {answer}"
            checked += 1
    assert checked >= 2 * 25
    for example in sorted((REPO / "deploy" / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(example.read_text()):
            status, answer = _dry_run_create(api, doc, namespace)
            assert status == 201, f"{example.name}: {status} {answer}"
    # The control: strict validation is on, an unknown field is refused.
    stray = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "spec": {}}
    status, answer = _dry_run_create(api, stray, namespace)
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
    deployments = {d.metadata.name for d in apps.list_namespaced_deployment(ns).items}
    assert deployments == {release.object(c) for c in ("extender", "scheduler", "webhook")}
    (daemonset,) = apps.list_namespaced_daemon_set(ns, label_selector=selector).items
    assert daemonset.spec.template.spec.node_selector == {contract.LABEL_NODE_ENABLED: "true"}
    services = {s.metadata.name: s for s in core.list_namespaced_service(ns).items}
    assert set(services) == {release.object("extender"), release.object("webhook")}
    assert services[release.object("webhook")].spec.ports[0].port == 9443
    accounts = {a.metadata.name for a in core.list_namespaced_service_account(ns).items}
    assert {release.object(c) for c in ("extender", "node", "scheduler", "webhook")} <= accounts


def test_webhook_configurations_are_installed_with_the_ca(
    release: Release, api: k8s.ApiClient
) -> None:
    """caBundle is the CA of the installed Secret; the rules; the selector and condition given."""
    secret = k8s.CoreV1Api(api).read_namespaced_secret(
        release.object("webhook-tls"), release.namespace
    )
    ca = base64.b64decode(secret.data["ca.crt"])
    admission = k8s.AdmissionregistrationV1Api(api)
    mutating = admission.read_mutating_webhook_configuration(release.object("webhook"))
    validating = admission.read_validating_webhook_configuration(release.object("webhook"))
    hooks = (
        (mutating.webhooks[0], "/mutate", ["CREATE"]),
        (validating.webhooks[0], "/validate", ["CREATE", "UPDATE"]),
    )
    for hook, path, operations in hooks:
        assert base64.b64decode(hook.client_config.ca_bundle) == ca
        assert hook.client_config.service.path == path
        assert hook.client_config.service.port == 9443
        assert [(r.operations, r.resources) for r in hook.rules] == [(operations, ["pods"])]
        assert [c.name for c in hook.match_conditions] == ["arkgpu-pods"]
        assert hook.failure_policy == "Fail"
        assert hook.namespace_selector.match_labels == {SELECTOR_LABEL: release.name}


def test_upgrade_keeps_the_generated_certificates(
    helm: Path, release: Release, control_plane: ControlPlane, api: k8s.ApiClient
) -> None:
    """helm upgrade finds the Secrets (lookup) and keeps their CA: webhooks and the
    scheduler keep trusting running pods; the changed value reaches the Deployment."""
    core = k8s.CoreV1Api(api)

    def cas() -> tuple[str, str]:
        secrets = [release.object(f"{c}-tls") for c in ("extender", "webhook")]
        read = [core.read_namespaced_secret(s, release.namespace) for s in secrets]
        return read[0].data["ca.crt"], read[1].data["ca.crt"]

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
    assert hook.webhooks[0].client_config.ca_bundle == before[1]
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(
        release.object("scheduler"), release.namespace
    )
    assert "--v=3" in deployment.spec.template.spec.containers[0].command


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
    assert created.spec.scheduler_name == "default-scheduler"
    for name, limits in (("gpu", {GPU: "1"}), ("cores", {contract.RESOURCE_GPUCORES: "30"})):
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
    ("node", "patch", "pods", "", "", True, True),
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
    assert answer.status.allowed is allowed, answer.status.reason


def _token_kubeconfig(
    api: k8s.ApiClient, plane: ControlPlane, release: Release, path: Path
) -> Path:
    """A kubeconfig that authenticates as the chart's scheduler ServiceAccount."""
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    token = (
        k8s.CoreV1Api(api)
        .create_namespaced_service_account_token(
            release.object("scheduler"), release.namespace, request
        )
        .status.token
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {"server": plane.server, "certificate-authority": str(plane.ca)},
            }
        ],
        "users": [{"name": "scheduler", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "scheduler"}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config))
    return path


@dataclass
class StandIn:
    """A stand-in extender on loopback: its port and the calls it received."""

    port: int
    calls: list[tuple[str, dict[str, Any]]]


class _StandInHandler(BaseHTTPRequestHandler):
    """The extender's place at the scheduler's calls: records each, refuses every node."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.calls.append((self.path, body))
        names = body.get("NodeNames") or []
        answer = {"NodeNames": [], "FailedNodes": dict.fromkeys(names, STAND_IN_REASON)}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads ``calls``."""


@contextmanager
def _stand_in_extender(api: k8s.ApiClient, release: Release, workdir: Path) -> Iterator[StandIn]:
    """An HTTPS server on loopback with the certificate the chart generated for the extender."""
    secret = k8s.CoreV1Api(api).read_namespaced_secret(
        release.object("extender-tls"), release.namespace
    )
    for key in ("tls.crt", "tls.key"):
        (workdir / key).write_bytes(base64.b64decode(secret.data[key]))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(workdir / "tls.crt", workdir / "tls.key")
    calls: list[tuple[str, dict[str, Any]]] = []
    handler = type("Handler", (_StandInHandler,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield StandIn(port=int(server.server_address[1]), calls=calls)
    finally:
        server.shutdown()
        server.server_close()


def _scheduler_config(
    api: k8s.ApiClient, release: Release, kubeconfig: Path, extender_port: int
) -> dict[str, Any]:
    """The installed KubeSchedulerConfiguration with two changes for a cluster without DNS or
    pods: where the API server is (in the cluster: the ServiceAccount) and the extender's URL
    pointed at loopback. The extender's TLS (caData, serverName) stays as installed."""
    data = k8s.CoreV1Api(api).read_namespaced_config_map(
        release.object("scheduler"), release.namespace
    )
    config: dict[str, Any] = yaml.safe_load(data.data["config.yaml"])
    assert "clientConnection" not in config
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    (extender,) = config["extenders"]
    host = f"{release.object('extender')}.{release.namespace}.svc"
    assert extender["urlPrefix"] == f"https://{host}:8888"
    assert extender["tlsConfig"]["serverName"] == host
    extender["urlPrefix"] = f"https://127.0.0.1:{extender_port}"
    return config


def test_kube_scheduler_runs_the_chart_configuration_under_the_chart_account(
    release: Release,
    control_plane: ControlPlane,
    api: k8s.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The real kube-scheduler loads the installed configuration as the chart's
    ServiceAccount, wins the arkgpu-scheduler Lease, and calls the extender for a GPU
    pod of its profile over HTTPS, trusting the certificate the chart generated."""
    kubeconfig = _token_kubeconfig(api, control_plane, release, tmp_path / "sa.kubeconfig")
    with _stand_in_extender(api, release, tmp_path) as stand_in:
        port = free_port()
        child = _start_scheduler(api, release, kubeconfig, tmp_path, (stand_in.port, port))
        try:
            node = _check_lease_and_extender_call(api, release, namespace, child)
            _check_probe_paths(api, release, port)
        finally:
            processes.stop(child, 15.0)
        log = child.log.read_text(errors="replace")
    assert "forbidden" not in log.lower(), log[-4000:]
    (path, args), *_ = stand_in.calls
    assert path == "/filter"
    assert args["NodeNames"] == [node]
    assert args["Pod"]["metadata"]["name"] == "shared-gpu"


def _start_scheduler(
    api: k8s.ApiClient,
    release: Release,
    kubeconfig: Path,
    workdir: Path,
    ports: tuple[int, int],
) -> processes.Child:
    """kube-scheduler with the installed configuration: ``ports`` = (extender, its own)."""
    config = _scheduler_config(api, release, kubeconfig, ports[0])
    config_file = workdir / "scheduler.yaml"
    config_file.write_text(yaml.safe_dump(config))
    return processes.start(
        "chart-kube-scheduler",
        [
            str(build_control_plane() / "kube-scheduler"),
            f"--config={config_file}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports[1]}",
            f"--cert-dir={workdir / 'certs'}",
        ],
        workdir,
    )


def _check_probe_paths(api: k8s.ApiClient, release: Release, port: int) -> None:
    """The paths the chart's Deployment probes answer 200 on the scheduler's HTTPS port."""
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(
        release.object("scheduler"), release.namespace
    )
    spec = deployment.spec.template.spec.containers[0]
    paths = [spec.liveness_probe.http_get.path, spec.readiness_probe.http_get.path]
    assert paths == ["/livez", "/readyz"]
    insecure = ssl.create_default_context()  # its self-signed certificate, on loopback
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    for path in paths:
        assert processes.http_ok(f"https://127.0.0.1:{port}{path}", insecure), path


def _check_lease_and_extender_call(
    api: k8s.ApiClient, release: Release, namespace: str, child: processes.Child
) -> str:
    """Waits for the Lease, then for a GPU pod's FailedScheduling; returns its node."""
    coordination, core = k8s.CoordinationV1Api(api), k8s.CoreV1Api(api)

    def holder() -> str | None:
        child.check_alive()
        try:
            lease = coordination.read_namespaced_lease(contract.SCHEDULER_NAME, release.namespace)
        except ApiException:
            return None
        return lease.spec.holder_identity or None

    wait_for(holder, SCHEDULE_TIMEOUT_S, "arkgpu-scheduler Lease held")
    node = f"chart-node-{uuid.uuid4().hex[:6]}"
    create_gpu_node(api, node, gpus=2)
    gpu = k8s.V1Container(
        name="main",
        image="registry.invalid/never-pulled",
        resources=k8s.V1ResourceRequirements(limits={GPU: "1"}),
    )
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="shared-gpu"),
        spec=k8s.V1PodSpec(
            scheduler_name=contract.SCHEDULER_NAME,
            containers=[gpu],
            node_selector={TEST_LABEL: node},
        ),
    )
    core.create_namespaced_pod(namespace, pod)

    def failed() -> str | None:
        child.check_alive()
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=shared-gpu"
        ).items
        messages = [e.message for e in events if e.reason == "FailedScheduling"]
        return messages[0] if messages else None

    message = wait_for(failed, SCHEDULE_TIMEOUT_S, "FailedScheduling of the GPU pod")
    assert STAND_IN_REASON in message, message
    return node
