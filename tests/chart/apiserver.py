"""Plumbing of the chart's end-to-end tests on a real API server (tests/e2e/test_chart.py).

Server-side dry-run with strict field validation, a kubeconfig for a
ServiceAccount's token, and a stand-in scheduler extender on loopback.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from kubernetes import client as k8s

from .helm import Manifest

STAND_IN_REASON = "refused by the stand-in extender"
"""What the stand-in extender answers for every node (the pod's FailedScheduling quotes it)."""

PATHS = {
    "v1": "/api/v1",
    "apps/v1": "/apis/apps/v1",
    "rbac.authorization.k8s.io/v1": "/apis/rbac.authorization.k8s.io/v1",
    "admissionregistration.k8s.io/v1": "/apis/admissionregistration.k8s.io/v1",
    "batch/v1": "/apis/batch/v1",
    "resource.k8s.io/v1": "/apis/resource.k8s.io/v1",
}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "DeviceClass",
}
PLURALS = {
    "ServiceAccount": "serviceaccounts",
    "Service": "services",
    "Secret": "secrets",
    "DeviceClass": "deviceclasses",
}


def dry_run_create(api: k8s.ApiClient, doc: Manifest, namespace: str) -> tuple[int, str]:
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
    data: bytes = response.read()  # type: ignore[no-untyped-call]  # not annotated by the client
    return int(response.status), data.decode(errors="replace")


def token_kubeconfig(
    api: k8s.ApiClient, server: str, ca: Path, account: tuple[str, str], path: Path
) -> Path:
    """A kubeconfig that authenticates as ``account`` (namespace, ServiceAccount) by a token."""
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    created = k8s.CoreV1Api(api).create_namespaced_service_account_token(
        account[1], account[0], request
    )
    assert created.status is not None
    token = created.status.token
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {"server": server, "certificate-authority": str(ca)},
            }
        ],
        "users": [{"name": "account", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "account"}}],
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
def stand_in_extender(secret: k8s.V1Secret, workdir: Path) -> Iterator[StandIn]:
    """An HTTPS server on loopback serving the certificate of a kubernetes.io/tls ``secret``."""
    assert secret.data is not None
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
