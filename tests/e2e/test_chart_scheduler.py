"""The real kube-scheduler runs the configuration the chart installed, under the chart's
ServiceAccount, and calls the extender over HTTPS with the chart's certificate.

No extender pod runs (no kubelet): a stand-in on loopback serves the certificate
the chart generated for the extender's Service, and records the calls.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from arkgpu.k8s import contract
from chart.apiserver import STAND_IN_REASON, stand_in_extender, token_kubeconfig
from chart.helm import build_helm

from . import processes
from .controlplane import ControlPlane, build_control_plane, free_port
from .kube_types import filled
from .nodes import GPU, TEST_LABEL, create_gpu_node, wait_for
from .test_chart import Release, installed_release

SCHEDULE_TIMEOUT_S = 60.0
"""Generous bound for the scheduler to start, win its lease and try a pod on a loaded machine."""


@pytest.fixture(scope="module")
def chart(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    """The chart installed by helm (a release of this module's own)."""
    with installed_release(build_helm(), control_plane, tmp_path_factory.mktemp("values")) as rel:
        yield rel


def _scheduler_config(
    api: k8s.ApiClient, chart: Release, kubeconfig: Path, extender_port: int
) -> dict[str, Any]:
    """The installed KubeSchedulerConfiguration with two changes for a cluster without DNS or
    pods: where the API server is (in the cluster: the ServiceAccount) and the extender's URL
    pointed at loopback. The extender's TLS (caData, serverName) stays as installed."""
    data = k8s.CoreV1Api(api).read_namespaced_config_map(chart.object("scheduler"), chart.namespace)
    config: dict[str, Any] = yaml.safe_load(filled(data.data)["config.yaml"])
    assert "clientConnection" not in config
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    (extender,) = config["extenders"]
    host = f"{chart.object('extender')}.{chart.namespace}.svc"
    assert extender["urlPrefix"] == f"https://{host}:8888"
    assert extender["tlsConfig"]["serverName"] == host
    extender["urlPrefix"] = f"https://127.0.0.1:{extender_port}"
    return config


def test_kube_scheduler_runs_the_chart_configuration_under_the_chart_account(
    chart: Release,
    control_plane: ControlPlane,
    api: k8s.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The real kube-scheduler loads the installed configuration as the chart's
    ServiceAccount, wins the arkgpu-scheduler Lease, and calls the extender for a GPU
    pod of its profile over HTTPS, trusting the certificate the chart generated."""
    account = (chart.namespace, chart.object("scheduler"))
    plane = control_plane
    kubeconfig = token_kubeconfig(api, plane.server, plane.ca, account, tmp_path / "sa.kubeconfig")
    secret = k8s.CoreV1Api(api).read_namespaced_secret(
        chart.object("extender-tls"), chart.namespace
    )
    with stand_in_extender(secret, tmp_path) as stand_in:
        port = free_port()
        child = _start_scheduler(api, chart, kubeconfig, tmp_path, (stand_in.port, port))
        try:
            node = _check_lease_and_extender_call(api, chart, namespace, child)
            _check_probe_paths(api, chart, port)
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
    chart: Release,
    kubeconfig: Path,
    workdir: Path,
    ports: tuple[int, int],
) -> processes.Child:
    """kube-scheduler with the installed configuration: ``ports`` = (extender, its own)."""
    config = _scheduler_config(api, chart, kubeconfig, ports[0])
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


def _check_probe_paths(api: k8s.ApiClient, chart: Release, port: int) -> None:
    """The paths the chart's Deployment probes answer 200 on the scheduler's HTTPS port."""
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(
        chart.object("scheduler"), chart.namespace
    )
    spec = filled(filled(deployment.spec).template.spec).containers[0]
    probes = [filled(spec.liveness_probe), filled(spec.readiness_probe)]
    paths = [filled(probe.http_get).path for probe in probes]
    assert paths == ["/livez", "/readyz"]
    insecure = ssl.create_default_context()  # its self-signed certificate, on loopback
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    for path in paths:
        assert processes.http_ok(f"https://127.0.0.1:{port}{path}", insecure), path


def _check_lease_and_extender_call(
    api: k8s.ApiClient, chart: Release, namespace: str, child: processes.Child
) -> str:
    """Waits for the Lease, then for a GPU pod's FailedScheduling; returns its node."""
    coordination, core = k8s.CoordinationV1Api(api), k8s.CoreV1Api(api)

    def holder() -> str | None:
        child.check_alive()
        try:
            lease = coordination.read_namespaced_lease(contract.SCHEDULER_NAME, chart.namespace)
        except ApiException:
            return None
        return filled(lease.spec).holder_identity or None

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
