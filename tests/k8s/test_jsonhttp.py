"""The JSON endpoint answers good requests, refuses bad ones with a 4xx and a reason, serves TLS."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from arkgpu.k8s.jsonhttp import JsonServer, RequestError, ServerConfig, encode
from e2e import pki


def _echo(body: Any) -> Any:
    if body == "refuse":
        raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, "refused on purpose")
    if body == "crash":
        raise ZeroDivisionError("a bug")
    return {"echo": body}


def _serve(config: ServerConfig, ready: bool = True) -> tuple[JsonServer, int]:
    server = JsonServer(config, {"/echo": _echo}, CollectorRegistry(), "t", lambda: ready)
    return server, server.start()


@pytest.fixture
def plain() -> Iterator[int]:
    server, port = _serve(ServerConfig("127.0.0.1", 0, max_body_bytes=1000, read_timeout_s=1.0))
    yield port
    server.close()


def _post(port: int, body: bytes, path: str = "/echo") -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def test_post_answers_the_handlers_json(plain: int) -> None:
    assert _post(plain, b'{"a": [1, 2]}') == (200, {"echo": {"a": [1, 2]}})


@pytest.mark.parametrize(
    ("body", "path", "status", "reason"),
    [
        (b"{not json", "/echo", 400, "body is not JSON (unexpected character, expected a string"),
        (b"\xff\xfe", "/echo", 400, "body is not JSON ("),
        (b"[" * 5000 + b"]" * 5000, "/echo", 413, "body over 1000 bytes"),
        (b'"refuse"', "/echo", 422, "refused on purpose"),
        (b'"crash"', "/echo", 500, "internal error: a bug"),
        (b"{}", "/nowhere", 404, "no such path '/nowhere'"),
    ],
)
def test_bad_requests_get_a_status_and_a_reason(
    plain: int, body: bytes, path: str, status: int, reason: str
) -> None:
    answer_status, answer = _post(plain, body, path)
    assert answer_status == status
    assert set(answer) == {"error"}
    assert answer["error"].startswith(reason)
    assert _post(plain, b"1") == (200, {"echo": 1})  # still serving


def test_a_body_without_length_is_refused(plain: int) -> None:
    with socket.create_connection(("127.0.0.1", plain), timeout=30) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        assert b" 411 " in sock.recv(4096).split(b"\r\n")[0] + b" "


def test_a_stalled_client_does_not_hold_the_server(plain: int) -> None:
    with socket.create_connection(("127.0.0.1", plain), timeout=30) as stalled:
        stalled.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        assert _post(plain, b"2") == (200, {"echo": 2})
        start = time.monotonic()
        first_line = stalled.recv(4096).split(b"\r\n")[0]
        assert b"408" in first_line
        assert time.monotonic() - start < 20


def test_health_readiness_and_metrics(plain: int) -> None:
    _post(plain, b"3")
    _post(plain, b"{")
    assert _get(plain, "/healthz") == (200, b"ok\n")
    assert _get(plain, "/readyz") == (200, b"ok\n")
    status, text = _get(plain, "/metrics")
    assert status == 200
    assert b't_http_requests_total{code="200",path="/echo"} 1.0' in text
    assert b't_http_requests_total{code="400",path="/echo"} 1.0' in text
    assert _get(plain, "/other")[0] == 404


def test_not_ready_answers_503() -> None:
    server, port = _serve(ServerConfig("127.0.0.1", 0), ready=False)
    try:
        assert _get(port, "/readyz") == (503, b"not ready\n")
    finally:
        server.close()


def test_tls(tmp_path: Path) -> None:
    ca = pki.make_ca()
    pair = pki.write(pki.issue(ca, "arkgpu", ips=("127.0.0.1",)), tmp_path, "serving")
    server, port = _serve(ServerConfig("127.0.0.1", 0, pair.cert, pair.key))
    try:
        (tmp_path / "ca.crt").write_bytes(pki.write(ca, tmp_path, "ca").cert.read_bytes())
        context = ssl.create_default_context(cafile=tmp_path / "ca.crt")
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
        conn.request("POST", "/echo", b"[4]")
        answer = conn.getresponse()
        assert (answer.status, json.loads(answer.read())) == (200, {"echo": [4]})
        conn.request("POST", "/nowhere", b"[" + b"0," * 100_000 + b"0]")  # an unread body: no reset
        answer = conn.getresponse()
        assert (answer.status, json.loads(answer.read())) == (
            404,
            {"error": "no such path '/nowhere'"},
        )
        conn.close()
        with pytest.raises(ConnectionError):  # plain HTTP to a TLS port: the server hangs up
            _post(port, b"5")
    finally:
        server.close()


def test_unreadable_certificate_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.crt"
    with pytest.raises(ValueError, match=r"none\.crt, .*: cannot load the certificate"):
        JsonServer(
            ServerConfig(tls_cert_file=missing, tls_key_file=missing), {}, CollectorRegistry(), "t"
        )


def test_answers_are_compact_json_and_what_orjson_refuses_falls_back() -> None:
    """orjson writes the answers; an integer past 64 bits (which orjson refuses) still goes out,
    through the standard library, in the same compact form."""
    assert encode({"a": [1, "x"], "b": None}) == b'{"a":[1,"x"],"b":null}'
    assert encode({"n": 2**70}) == b'{"n":1180591620717411303424}'
