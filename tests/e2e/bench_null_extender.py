"""A scheduler extender that decides nothing: the protocol's own cost, for the benchmark.

    python -m tests.e2e.bench_null_extender --kubeconfig FILE --port PORT

Speaks the kube-scheduler extender v1 JSON with ``nodeCacheCapable`` true:
``/filter`` keeps every node it is given, ``/prioritize`` scores each 0 and
``/bind`` posts the Binding. The benchmark's ``null`` phase runs it where the
``extender`` phase runs ``arkgpu extender run`` (a separate Python process
behind the same KubeSchedulerConfiguration), so stock -> null -> extender
splits the extender's cost into the HTTP round trips and ArkGPU's own work.
Not a product: no TLS, no snapshot, no checks.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config


def answer(path: str, args: dict[str, Any], core: k8s.CoreV1Api) -> object:
    """The extender's reply to ``args`` on ``path`` (KeyError: not a route)."""
    if path == "/filter":
        return {"NodeNames": args["NodeNames"], "FailedNodes": {}, "Error": ""}
    if path == "/prioritize":
        return [{"Host": name, "Score": 0} for name in args["NodeNames"]]
    if path == "/bind":
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args["PodName"], "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
        }
        # The client sends a dict body as it is; its annotation names only V1Binding.
        core.create_namespaced_pod_binding(
            args["PodName"],
            args["PodNamespace"],
            binding,  # type: ignore[arg-type]
            _preload_content=False,
        )
        return {"Error": ""}
    raise KeyError(path)


def handler(core: k8s.CoreV1Api) -> type[BaseHTTPRequestHandler]:
    """The request handler class, bound to the API client."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm the body waits for
        # the caller's delayed ACK (up to 40 ms), which would cap the phase near 12 pods/s.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a line per request would cost more than the answer."""

        def _reply(self, status: int, value: object) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            """``/healthz``, ``/readyz``: always ready."""
            self._reply(200, "ok")

        def do_POST(self) -> None:
            """filter, prioritize, bind."""
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                self._reply(200, answer(self.path, json.loads(body), core))
            except KeyError as exc:
                self._reply(404, {"Error": f"unknown route or field {exc}"})

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Serves until killed."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.bench_null_extender")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    api = k8s_config.new_client_from_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(k8s.CoreV1Api(api)))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
