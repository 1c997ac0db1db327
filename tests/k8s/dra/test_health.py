"""The DRA driver's /healthz, /readyz and /metrics over real HTTP, its kubelet plugin served
over real Unix sockets and registered by the emulated kubelet (``kubelet.py``)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from arkgpu.k8s.dra import wire
from arkgpu.k8s.dra.config import DraConfig
from arkgpu.k8s.dra.health import DriverState, probes, socket_serves, stale_after_s
from arkgpu.k8s.dra.plugin import DraService, serve_plugin
from arkgpu.k8s.dra.wire import reg
from arkgpu.probes import serve_probes, stop_probes

from . import kubelet
from .test_plugin import DRIVER, Claims, allocated_claim, make_preparer


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of a GET on 127.0.0.1:port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def metric(port: int, name: str) -> float:
    """The one sample ``name`` of /metrics."""
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


@dataclass
class Driver:
    """A driver's state, its plugin's gRPC server and its HTTP endpoint's port."""

    state: DriverState
    server: grpc.Server
    port: int


@pytest.fixture
def driver(workdir: Path) -> Iterator[Driver]:
    """The kubelet plugin served (not yet registered) and the endpoint on a free port."""
    config = DraConfig(
        node_name="node-1", registry_dir=workdir / "registry", plugin_dir=workdir / "plugin"
    )
    state = DriverState(config)
    state.service = DraService(Claims(allocated_claim()), make_preparer(workdir), DRIVER, Claims())
    server, state.registration = serve_plugin(
        config.registry_socket, config.dra_socket, state.service
    )
    http = serve_probes(probes(state), "127.0.0.1", 0)
    try:
        yield Driver(state, server, http.server_port)
    finally:
        stop_probes(http)
        server.stop(None)


def test_ready_once_published_and_registered_and_metrics_count_the_claims(
    driver: Driver, workdir: Path
) -> None:
    """Live from the start; ready only after the slice is published and the kubelet took
    the registration; /metrics counts registrations, claims and slice writes."""
    port = driver.port
    assert get(port, "/healthz") == (200, "ok\n")
    assert get(port, "/readyz") == (503, "ResourceSlice not published yet\n")
    driver.state.published("created", 1)
    status, text = get(port, "/readyz")
    assert (status, text.split("(")[0]) == (503, "not registered with the kubelet yet ")
    plugin = kubelet.register(workdir / "registry")
    assert get(port, "/readyz") == (200, "ok\n")
    assert kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"].error == ""
    assert kubelet.prepare(plugin, [("ns", "gone", "u9")]).claims["u9"].error
    assert kubelet.unprepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"].error == ""
    driver.state.published("unchanged", 1)
    driver.state.failed()
    for name, value in (
        ("registrations_total", 1),
        ("prepared_claims_total", 1),
        ("prepare_errors_total", 1),
        ("unprepared_claims_total", 1),
        ("unprepare_errors_total", 0),
        ("slice_writes_total", 1),
        ("resync_failures_total", 1),
        ("devices", 1),
    ):
        assert metric(port, f"arkgpu_dra_driver_{name}") == value, name


def test_a_refused_registration_is_not_ready_with_the_kubelets_reason(driver: Driver) -> None:
    """The kubelet answers NotifyRegistrationStatus with an error: /readyz names it."""
    driver.state.published("created", 1)
    socket = driver.state.config.registry_socket
    with grpc.insecure_channel(wire.unix_target(socket)) as channel:
        wire.registration_stub(channel).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error="version v9 unsupported"),
            timeout=30,
            wait_for_ready=True,
        )
    assert get(driver.port, "/readyz") == (
        503,
        "the kubelet refused the registration: version v9 unsupported\n",
    )


def test_stopped_grpc_servers_or_a_stalled_loop_fail_liveness(
    driver: Driver, workdir: Path
) -> None:
    """The gRPC server stops: /healthz and /readyz fail naming the socket. A loop that has
    not resynced for longer than the stale bound fails /healthz too."""
    driver.state.published("created", 1)
    kubelet.register(workdir / "registry")
    assert get(driver.port, "/readyz") == (200, "ok\n")
    driver.server.stop(None).wait(30)
    config = driver.state.config
    assert get(driver.port, "/healthz") == (
        503,
        f"gRPC server not answering on {config.registry_socket}\n",
    )
    assert get(driver.port, "/readyz") == (503, f"plugin socket {config.dra_socket} not serving\n")
    stale = stale_after_s(config)
    assert stale == 50.0  # 5 resyncs of 10 s
    driver.state.last_tick = time.monotonic() - stale - 1
    assert get(driver.port, "/healthz") == (503, "loop stalled: no resync for 51 s\n")


def test_without_the_kubelet_plugin_ready_means_published(workdir: Path) -> None:
    """kubelet_plugin = false: no socket is dialled; ready once the slice is published."""
    config = DraConfig(node_name="n", kubelet_plugin=False, registry_dir=workdir / "none")
    state = DriverState(config)
    http = serve_probes(probes(state), "127.0.0.1", 0)
    try:
        assert get(http.server_port, "/healthz") == (200, "ok\n")
        assert get(http.server_port, "/readyz")[0] == 503
        state.published("created", 2)
        assert get(http.server_port, "/readyz") == (200, "ok\n")
        assert metric(http.server_port, "arkgpu_dra_driver_devices") == 2
        assert metric(http.server_port, "arkgpu_dra_driver_registrations_total") == 0
    finally:
        stop_probes(http)


def test_socket_serves_only_while_a_grpc_server_listens(workdir: Path) -> None:
    """A missing socket file, or one nobody listens on, does not serve within the timeout."""
    assert not socket_serves(workdir / "missing.sock", 0.5)
