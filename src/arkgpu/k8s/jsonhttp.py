"""JSON over HTTP(S) for the extender and the webhook: routes, limits, health, metrics.

The API server and kube-scheduler call ArkGPU with a JSON body on POST and
read a JSON answer. :class:`JsonServer` serves a table of routes (path ->
handler taking the parsed body) on a thread per connection, with:

- TLS when a certificate and key are configured (the handshake runs in the
  connection's thread, so a client that stalls it holds only its own thread);
- a body limit (413), a read timeout, a required ``Content-Length`` (411) and
  JSON that must parse (400): a malformed or hostile request gets a 4xx with
  its reason in one line, never a traceback or a hang;
- a handler raising :class:`RequestError` answers with that status; any other
  exception answers 500 with one line and is logged with its traceback;
- ``GET /healthz`` (the process answers), ``/readyz`` (the ``ready`` callable,
  e.g. the first list from the API server is in) and ``/metrics`` (Prometheus
  text of the registry given, with a request counter and a latency histogram
  per route).

Bodies are read and written with orjson (a well-kept C/Rust JSON library): at
1,000 nodes the extender's answers (a score object per node, a reason per
node that does not fit) and the requests took the standard library about 0.6 ms a pod to read and
write, orjson 0.07 ms (docs/studies/extender.md); anything orjson cannot write falls back to
the standard library. The standard library's ``http.server`` does the HTTP/1.1 parsing: the bodies
are small, the callers few (one kube-scheduler, the API servers), and it adds
no dependency to a daemon that runs on every cluster.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LOG = logging.getLogger(__name__)

Handler = Callable[[Any], Any]
"""Takes the parsed JSON body, returns what is sent back as JSON (status 200)."""


class RequestError(Exception):
    """A request the handler refuses: answered with ``status`` and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ServerConfig:
    """Where and how a JSON endpoint listens."""

    listen_address: str = "0.0.0.0"
    """Address to listen on (default all IPv4 addresses; 127.0.0.1 for loopback only)."""
    port: int = 8888
    """TCP port (0: any free port, for tests)."""
    tls_cert_file: Path | None = None
    """Serving certificate (PEM, chain allowed); None with ``tls_key_file`` None: plain HTTP."""
    tls_key_file: Path | None = None
    """Private key of the certificate (PEM)."""
    max_body_bytes: int = 16 * 1024 * 1024
    """Largest request body accepted, bytes (default 16 MiB: a 5,000-node NodeList)."""
    read_timeout_s: float = 10.0
    """Longest wait for a client's next bytes, seconds (default 10)."""

    @property
    def tls(self) -> bool:
        """Whether the endpoint serves HTTPS."""
        return self.tls_cert_file is not None


def tls_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server context for the PEM files (TLS 1.2 at least); ValueError naming the file."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{cert_file}, {key_file}: cannot load the certificate ({exc})") from None
    return context


@dataclass
class _Metrics:
    requests: Counter
    seconds: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry, prefix: str) -> _Metrics:
        return cls(
            Counter(
                f"{prefix}_http_requests",
                "HTTP requests answered, by path and status code.",
                ["path", "code"],
                registry=registry,
            ),
            Histogram(
                f"{prefix}_http_request_duration_seconds",
                "Time from a request's body read to its answer written, by path.",
                ["path"],
                buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0),
                registry=registry,
            ),
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    app: JsonServer

    def finish_request(self, request: Any, client_address: Any) -> None:
        app = self.app
        request.settimeout(app.config.read_timeout_s)
        if app.context is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = app.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            LOG.info("TLS handshake with %s failed: %s", client_address[0], exc)
            return
        with wrapped:
            super().finish_request(wrapped, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        LOG.warning("connection from %s ended with an error", client_address[0], exc_info=True)


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK (40 ms on Linux) on every keep-alive request. TCP_NODELAY.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        status, body, kind = self.server.app.answer_get(self.path)
        self._send(status, body, kind)

    def do_POST(self) -> None:
        app = self.server.app
        start = time.perf_counter()
        status, payload = app.answer_post(self.path, self._body)
        if status >= HTTPStatus.BAD_REQUEST:
            self.close_connection = True  # the body may be unread: never parse it as a request
        self._send(status, encode(payload), "application/json")
        app.observe(self.path, status, time.perf_counter() - start)

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None:
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
        if not (length.isascii() and length.isdigit()):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"bad Content-Length {length[:40]!r}")
        limit = self.server.app.config.max_body_bytes
        if int(length) > limit:
            raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {limit} bytes")
        try:
            body = self.rfile.read(int(length))
        except OSError as exc:
            raise RequestError(HTTPStatus.REQUEST_TIMEOUT, f"body not received ({exc})") from None
        if len(body) < int(length):
            raise RequestError(HTTPStatus.BAD_REQUEST, "body shorter than its Content-Length")
        return body

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class JsonServer:
    """Serves ``routes`` (POST, JSON in and out) and the health and metrics paths."""

    def __init__(
        self,
        config: ServerConfig,
        routes: Mapping[str, Handler],
        registry: CollectorRegistry,
        metrics_prefix: str,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.config, self.routes, self.registry, self.ready = config, dict(routes), registry, ready
        self.context: ssl.SSLContext | None = None
        if config.tls_cert_file is not None and config.tls_key_file is not None:
            self.context = tls_context(config.tls_cert_file, config.tls_key_file)
        self._metrics = _Metrics.create(registry, metrics_prefix)
        self._http: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Listens and serves on a background thread; returns the bound port."""
        address = (self.config.listen_address, self.config.port)
        family = socket.AF_INET6 if ":" in self.config.listen_address else socket.AF_INET
        server = type("_BoundServer", (_Server,), {"address_family": family})
        self._http = server(address, _RequestHandler)
        self._http.app = self
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return int(self._http.server_address[1])

    def close(self) -> None:
        """Stops listening (requests in flight finish on their threads)."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def answer_post(self, path: str, read_body: Callable[[], bytes]) -> tuple[int, Any]:
        """Status and JSON answer of a POST to ``path``."""
        handler = self.routes.get(path.split("?", 1)[0])
        try:
            body = read_body()  # read first: an answer over an unread body resets the connection
            if handler is None:
                raise RequestError(HTTPStatus.NOT_FOUND, f"no such path {path[:100]!r}")
            return HTTPStatus.OK, handler(_parse(body))
        except RequestError as exc:
            return exc.status, {"error": str(exc)}
        except Exception as exc:  # a bug must not take the endpoint down: answer 500, log
            LOG.exception("%s failed", path)
            return HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"internal error: {exc}"}

    def answer_get(self, path: str) -> tuple[int, bytes, str]:
        """Status, body and content type of a GET of ``path``."""
        path = path.split("?", 1)[0]
        if path == "/healthz":
            return HTTPStatus.OK, b"ok\n", "text/plain"
        if path == "/readyz":
            ok = self.ready()
            return (
                (HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE),
                (b"ok\n" if ok else b"not ready\n"),
                "text/plain",
            )
        if path == "/metrics":
            return HTTPStatus.OK, generate_latest(self.registry), CONTENT_TYPE_LATEST
        return HTTPStatus.NOT_FOUND, b"not found\n", "text/plain"

    def observe(self, path: str, status: int, seconds: float) -> None:
        """Counts one answered POST (known paths by name, others as ``other``)."""
        label = path if path in self.routes else "other"
        self._metrics.requests.labels(label, str(int(status))).inc()
        self._metrics.seconds.labels(label).observe(seconds)


def encode(payload: Any) -> bytes:
    """``payload`` as compact JSON (orjson; the standard library for what orjson refuses,
    such as integers past 64 bits)."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, separators=(",", ":")).encode()


def _parse(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        raise RequestError(HTTPStatus.BAD_REQUEST, f"body is not JSON ({exc})") from None
