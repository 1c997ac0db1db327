"""The extender's connection to the API server cut mid-stream (a proxy between them closes
every connection and refuses new ones for a while): binds fail and are retried, the watch
reconnects, and every pod ends bound once with its assignment, no GPU over-committed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from kubernetes import client as k8s

from .controlplane import ExtenderPlane, free_port, write_kubeconfig
from .extender_helpers import (
    ExtenderProcess,
    TcpProxy,
    check_consistent,
    create_nodes,
    gpu_pod,
    pods_json,
    wait_bound,
)
from .kube_types import body as json_body

SETTLE_TIMEOUT_S = 120.0
SHARE = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "25", "nvidia.com/gpumem": "16384"}


@pytest.fixture(scope="module")
def behind_proxy(extender_plane: ExtenderPlane) -> Iterator[tuple[ExtenderProcess, TcpProxy]]:
    plane = extender_plane.plane
    proxy = TcpProxy(int(urlparse(plane.server).port or 443), free_port())
    proxy.start()
    kubeconfig = write_kubeconfig(
        extender_plane.workdir / "via-proxy.kubeconfig",
        f"https://127.0.0.1:{proxy.port}",
        plane.ca,
        plane.admin,
    )
    process = ExtenderProcess(extender_plane, kubeconfig=kubeconfig)
    process.start()
    yield process, proxy
    process.kill()
    proxy.cut()


def test_api_connection_cut_loses_nothing(
    behind_proxy: tuple[ExtenderProcess, TcpProxy], extender_plane: ExtenderPlane
) -> None:
    process, proxy = behind_proxy
    with extender_plane.plane.api_client() as admin:
        core = k8s.CoreV1Api(admin)
        ns = f"cut-{time.monotonic_ns() % 10**9}"
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
        core.create_namespaced_service_account(
            ns, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
        )
        group, _ = create_nodes(admin, 3, 4)
        for k in range(40):
            core.create_namespaced_pod(ns, json_body(gpu_pod(f"p{k}", group, SHARE)))
        wait_bound(admin, ns, 8, SETTLE_TIMEOUT_S)
        proxy.cut()
        time.sleep(3.0)
        check_consistent(pods_json(admin, ns))
        proxy.start()
        wait_bound(admin, ns, 40, SETTLE_TIMEOUT_S)
        time.sleep(1.0)
        assert check_consistent(pods_json(admin, ns)) == 40
        assert process.child is not None
        assert process.child.popen.poll() is None  # it rode the cut out, no restart
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
