"""``load_client``, the one way every ArkGPU component reaches the API server.

Pinned: a kubeconfig with TLS files (CA, client certificate and key, as the
end-to-end tests generate them) and the pod's in-cluster service account (the
environment and the token and CA files) each give a client that really talks
TLS to a server, authenticated as configured; neither touches the ``kubernetes``
package's global default configuration; a missing file or account is a one-line
``ValueError``.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.config import incluster_config

from arkgpu.k8s.cluster.kube import POOL_SIZE, KubeApi, load_client
from e2e import pki
from e2e.controlplane import write_kubeconfig

NODE_LIST = {"kind": "NodeList", "items": [], "metadata": {"resourceVersion": "42"}}


@dataclass
class Seen:
    """What the fake API server saw of each request."""

    paths: list[str] = field(default_factory=list)
    authorization: list[str] = field(default_factory=list)
    client_names: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Server:
    """A TLS server on loopback that answers every GET with an empty node list."""

    url: str
    port: int
    ca: pki.Issued
    ca_file: Path
    seen: Seen


def _handler(seen: Seen) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            peer = self.connection.getpeercert()
            names = [
                v for rdn in (peer or {}).get("subject", ()) for k, v in rdn if k == "commonName"
            ]
            seen.paths.append(self.path)
            seen.authorization.append(self.headers.get("Authorization", ""))
            seen.client_names.extend(names)
            body = json.dumps(NODE_LIST).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The fake API server, its certificate signed by a fresh CA that also signs clients."""
    ca = pki.make_ca()
    ca_file = pki.write(ca, tmp_path, "ca").cert
    serving = pki.write(pki.issue(ca, "apiserver", ips=("127.0.0.1",)), tmp_path, "serving")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(serving.cert, serving.key)
    context.load_verify_locations(ca_file)
    context.verify_mode = ssl.CERT_OPTIONAL
    seen = Seen()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    try:
        yield Server(f"https://127.0.0.1:{port}", port, ca, ca_file, seen)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _default_host() -> str:
    return str(client.Configuration.get_default_copy().host)


def test_a_kubeconfig_with_client_certificates_reaches_the_server(
    server: Server, tmp_path: Path
) -> None:
    """The CA, client certificate and key of the kubeconfig are used; the global is left alone."""
    user = pki.write(pki.issue(server.ca, "arkgpu-test-user"), tmp_path, "user")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, server.ca_file, user)
    before = _default_host()
    api_client = load_client(kubeconfig)
    try:
        assert api_client.configuration.host == server.url
        assert api_client.configuration.connection_pool_maxsize == POOL_SIZE
        listed = KubeApi(api_client).list("nodes")
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    assert (listed.items, listed.resource_version) == ([], "42")
    assert server.seen.paths == ["/api/v1/nodes"]
    assert server.seen.client_names == ["arkgpu-test-user"]
    assert _default_host() == before


def test_the_in_cluster_account_reaches_the_server_with_its_token(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KUBERNETES_SERVICE_HOST/PORT, the token as a bearer, the account's CA for TLS."""
    token = tmp_path / "token"
    token.write_text("secret-token-1")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(server.ca_file))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    before = _default_host()
    api_client = load_client(None)
    try:
        assert api_client.configuration.host == server.url
        listed = KubeApi(api_client).list("nodes")
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    assert listed.resource_version == "42"
    [(scheme, token_sent)] = (a.split(" ", 1) for a in server.seen.authorization)
    assert (scheme.lower(), token_sent) == ("bearer", "secret-token-1")
    assert server.seen.client_names == []
    assert _default_host() == before


def test_no_service_account_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a pod (no service environment) the error says which source failed."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "none"))
    with pytest.raises(
        ValueError, match=r"^in-cluster service account \(no kubeconfig\): "
    ) as info:
        load_client(None)
    assert "\n" not in str(info.value)


def test_a_malformed_kubeconfig_is_one_line(tmp_path: Path) -> None:
    """A kubeconfig without a current context names the file, on one line."""
    kubeconfig = tmp_path / "broken.kubeconfig"
    kubeconfig.write_text('{"apiVersion": "v1", "kind": "Config"}')
    with pytest.raises(ValueError, match=r"broken\.kubeconfig: cannot load") as info:
        load_client(kubeconfig)
    assert "\n" not in str(info.value)
