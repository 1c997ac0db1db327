"""Fakes of the API server for the device plugin's tests.

- :class:`MemoryApi`: the plugin's ``PodApi``/``NodeApi`` in memory (unit tests).
- :class:`HttpApiServer`: the REST calls the real adapter makes (list pods by
  ``spec.nodeName``, get a pod, merge-patch a pod or a node), over HTTP on
  loopback, so a plugin process with the official client can run without a
  control plane. Patches record their content type.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from arkgpu.k8s.deviceplugin.apiserver import PodInfo


class MemoryApi:
    """Pods and node annotations in memory."""

    def __init__(self, pods: list[PodInfo] | None = None) -> None:
        self.pods = list(pods or [])
        self.node_annotations: dict[str, dict[str, str]] = {}
        self.fail_next = 0
        """How many of the next calls raise (an API server away)."""

    def _maybe_fail(self) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("connection refused (test)")

    def pods_on_node(self, node: str) -> list[PodInfo]:
        self._maybe_fail()
        return [p for p in self.pods if p.node == node]

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self._maybe_fail()
        for n, pod in enumerate(self.pods):
            if (pod.namespace, pod.name) == (namespace, name):
                merged = {**pod.annotations, **annotations}
                self.pods[n] = PodInfo(**{**pod.__dict__, "annotations": merged})
                return
        raise LookupError(f"pod {namespace}/{name} not found")

    def annotate_node(self, node: str, annotations: dict[str, str]) -> None:
        self._maybe_fail()
        self.node_annotations.setdefault(node, {}).update(annotations)

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        self._maybe_fail()
        return next((p for p in self.pods if (p.namespace, p.name) == (namespace, name)), None)


def pod_json(
    namespace: str, name: str, node: str, annotations: dict[str, str], gpus: int = 1
) -> dict[str, Any]:
    """A bound pod as the API server returns it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-12-04T20:00:00Z",
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


class HttpApiServer:
    """Pods and nodes behind the REST paths the plugin uses (see the module's text)."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.patch_types: list[str] = []
        self.lock = threading.Lock()

    def add_node(self, name: str) -> None:
        self.nodes[name] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}

    def add_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.pods[meta["namespace"], meta["name"]] = pod

    def annotations(self, obj: dict[str, Any]) -> dict[str, str]:
        with self.lock:
            return dict(obj["metadata"].get("annotations") or {})

    def handle(self, method: str, url: str, body: bytes, content_type: str) -> tuple[int, Any]:
        parsed = urlparse(url)
        parts = parsed.path.strip("/").split("/")
        with self.lock:
            if method == "GET" and len(parts) == 6 and parts[4] == "pods":
                found = self._target(parts)
                return (200, found) if found else (404, {"kind": "Status", "code": 404})
            if method == "GET" and parts == ["api", "v1", "pods"]:
                selector = parse_qs(parsed.query).get("fieldSelector", [""])[0]
                node = selector.removeprefix("spec.nodeName=")
                items = [p for p in self.pods.values() if p["spec"].get("nodeName") == node]
                return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
            if method == "PATCH":
                self.patch_types.append(content_type)
                target = self._target(parts)
                if target is None:
                    return 404, {"kind": "Status", "apiVersion": "v1", "code": 404}
                patch = json.loads(body)
                notes = target["metadata"].setdefault("annotations", {})
                notes.update(patch["metadata"]["annotations"])
                return 200, target
        return 404, {"kind": "Status", "apiVersion": "v1", "code": 404}

    def _target(self, parts: list[str]) -> dict[str, Any] | None:
        if len(parts) == 4 and parts[:3] == ["api", "v1", "nodes"]:
            return self.nodes.get(parts[3])
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            return self.pods.get((parts[3], parts[5]))
        return None


@contextmanager
def serving(api: HttpApiServer, kubeconfig: Path) -> Iterator[str]:
    """Serve ``api`` on loopback; write a kubeconfig for it; yield its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            kind = self.headers.get("Content-Type", "")
            status, answer = api.handle(self.command, self.path, body, kind)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = _answer  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig.write_text(json.dumps(_kubeconfig(url)), encoding="utf-8")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def _kubeconfig(url: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "current-context": "fake",
    }
