"""``/healthz``, ``/readyz`` and ``/metrics`` of the DRA driver (``listen_address:port``,
served by :mod:`arkgpu.probes`, as the device plugin's).

- ``/healthz``: 200 while the resync loop ticked within max(30 s, 5 ``resync_s``) and,
  with ``kubelet_plugin``, both gRPC servers (registration and DRA sockets) accept a
  connection within :data:`DIAL_TIMEOUT_S`; else 503 with the reason, and the kubelet
  restarts the container (a new start serves fresh sockets).
- ``/readyz``: 200 once the ResourceSlice is published and, with ``kubelet_plugin``, the
  kubelet took the registration and the DRA socket serves; else 503 with the reason.
- ``/metrics``: registrations, claims prepared and unprepared (and errors), slice writes,
  failed resyncs and the devices published (docs/k8s/DRA.md lists them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from arkgpu.k8s.dra.config import DraConfig
from arkgpu.probes import Probes

if TYPE_CHECKING:  # grpc is loaded only where the kubelet plugin is served
    from arkgpu.k8s.dra.plugin import DraService, RegistrationService

STALE_AFTER_S = 30.0
"""Least time without a resync before ``/healthz`` fails, seconds (an NVML scan and a slice
write can take seconds on a loaded node)."""
DIAL_TIMEOUT_S = 2.0
"""How long a probe waits for one of the driver's own gRPC sockets to accept, seconds (the
chart's probes allow 5 s for the whole answer)."""
PREFIX = "arkgpu_dra_driver_"


@dataclass
class DriverState:
    """What the driver's loop and kubelet plugin record, for the probes and ``/metrics``."""

    config: DraConfig
    service: DraService | None = None
    """The DRA service (None: ``kubelet_plugin`` is false)."""
    registration: RegistrationService | None = None
    """The registration service (None: ``kubelet_plugin`` is false)."""
    last_tick: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` of the last resync (or of the start)."""
    devices: int = -1
    """Devices in the published slice (-1: not published yet)."""
    slice_writes: int = 0
    """Slices created or updated."""
    resync_failures: int = 0
    """Resyncs that failed (the API server or NVML away)."""

    def published(self, outcome: str, devices: int) -> None:
        """A reconcile ended with ``outcome`` ("created", "updated", "unchanged")."""
        self.devices = devices
        self.slice_writes += outcome != "unchanged"
        self.last_tick = time.monotonic()

    def failed(self) -> None:
        """A resync failed (the loop goes on)."""
        self.resync_failures += 1
        self.last_tick = time.monotonic()


def socket_serves(socket: Path, timeout_s: float = DIAL_TIMEOUT_S) -> bool:
    """Whether a gRPC server accepts a connection on the Unix ``socket`` within ``timeout_s``."""
    import grpc  # noqa: PLC0415 (the kubelet plugin's dependency)

    from arkgpu.k8s.dra.wire import unix_target  # noqa: PLC0415

    with grpc.insecure_channel(unix_target(socket)) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            return False
    return True


def stale_after_s(config: DraConfig) -> float:
    """Time without a resync after which ``/healthz`` fails: max(30 s, 5 ``resync_s``)."""
    return max(STALE_AFTER_S, 5 * config.resync_s)


def live(state: DriverState) -> str:
    """``/healthz``: "" while the loop ticks and the gRPC servers answer, else the reason."""
    config = state.config
    age = time.monotonic() - state.last_tick
    if age >= stale_after_s(config):
        return f"loop stalled: no resync for {age:.0f} s"
    if config.kubelet_plugin:
        for socket in (config.registry_socket, config.dra_socket):
            if not socket_serves(socket):
                return f"gRPC server not answering on {socket}"
    return ""


def ready(state: DriverState) -> str:
    """``/readyz``: "" once published and registered with the kubelet, else the reason."""
    if state.devices < 0:
        return "ResourceSlice not published yet"
    return _plugin_unready(state) if state.config.kubelet_plugin else ""


def _plugin_unready(state: DriverState) -> str:
    config, registration = state.config, state.registration
    if registration is None:
        return "kubelet plugin not started"
    if registration.error:
        return f"the kubelet refused the registration: {registration.error}"
    if not registration.registered.is_set():
        return f"not registered with the kubelet yet ({config.registry_socket})"
    if not socket_serves(config.dra_socket):
        return f"plugin socket {config.dra_socket} not serving"
    return ""


class DriverCollector(Collector):
    """The driver's counters and gauges, read at each scrape."""

    def __init__(self, state: DriverState) -> None:
        """Collect from ``state``."""
        self.state = state

    def collect(self) -> Iterator[Any]:
        """The metric families (prometheus-client's collector protocol)."""
        st, svc, reg = self.state, self.state.service, self.state.registration
        for name, text, value in (
            ("registrations", "Registrations the kubelet accepted.", reg and reg.registrations),
            ("prepared_claims", "Claims prepared (NodePrepareResources).", svc and svc.prepared),
            (
                "prepare_errors",
                "Claims whose NodePrepareResources answered an error.",
                svc and svc.prepare_errors,
            ),
            ("unprepared_claims", "Claims unprepared.", svc and svc.unprepared),
            (
                "unprepare_errors",
                "Claims whose NodeUnprepareResources answered an error.",
                svc and svc.unprepare_errors,
            ),
            ("slice_writes", "ResourceSlices created or updated.", st.slice_writes),
            ("resync_failures", "Resyncs that failed (API server or NVML).", st.resync_failures),
        ):
            yield CounterMetricFamily(PREFIX + name, text, value=value or 0)
        yield GaugeMetricFamily(
            PREFIX + "devices", "Devices (GPUs) in the published slice.", value=max(st.devices, 0)
        )


def probes(state: DriverState) -> Probes:
    """The driver's three answers."""
    return Probes(lambda: live(state), lambda: ready(state), DriverCollector(state))
