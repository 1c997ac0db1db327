"""A kubelet emulator: the kubelet's side of the device plugin API v1beta1 over real Unix sockets.

What the kubelet's device manager does, built from the same vendored proto:

- serves ``Registration`` on ``<dir>/kubelet.sock``; a Register with another
  API version is refused, as the kubelet does;
- after answering a Register, connects back to ``<dir>/<endpoint>`` and keeps
  a ListAndWatch stream open, recording every device list it receives;
- admits a pod as the kubelet's device manager does (:mod:`k8s.device_manager`):
  init containers first, then app containers, which reuse the init containers'
  devices; for each container the healthy free devices go to
  GetPreferredAllocation (when served), then Allocate; a failed Allocate rejects
  the pod (its devices are freed, it never becomes active);
- ``start_container()``: PreStartContainer with the container's devices (when the plugin
  asked for it), then the saved Allocate answer, as the kubelet starts containers;
- serves the PodResources API v1 (List, Get, GetAllocatableResources) on its own
  socket from the same records, so the plugin can ask whose devices they are;
- ``restart()``: stops, deletes every file in its directory (the kubelet's
  start-up removes every socket there, the plugins' too) and serves a new
  ``kubelet.sock``; the allocations survive, as in the kubelet's checkpoint, and
  a container started afterwards gets its saved answer without an Allocate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2 as pb
from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from arkgpu.k8s.proto.podresources.v1 import api_pb2_grpc as pr_grpc
from k8s.device_manager import DeviceManager, PodResources, PodSpec

KUBELET_SOCKET = "kubelet.sock"
SUPPORTED_VERSIONS = ("v1beta1",)
MAX_DEVICE_ID = 63
"""The proto's limit on a device ID's length."""
HEALTH_VALUES = ("Healthy", "Unhealthy")


@dataclass
class Endpoint:
    """One registered plugin as the emulator sees it."""

    request: pb.RegisterRequest
    channel: grpc.Channel
    stub: pb_grpc.DevicePluginStub
    lists: list[dict[str, str]] = field(default_factory=list)
    """Every ListAndWatch response: device ID -> health."""
    stream_error: str = ""
    """Why the ListAndWatch stream ended (empty while open)."""


class KubeletEmulator:
    """The kubelet's device manager, emulated (see the module's text)."""

    def __init__(self, directory: Path, pod_resources: Path | None = None) -> None:
        self.directory = directory
        self.pod_resources = pod_resources or directory / "pod-resources.sock"
        """The PodResources API socket (the kubelet's is in ``pod-resources/``)."""
        self.manager = DeviceManager()
        """Pods, their containers' devices and saved Allocate answers (the checkpoint)."""
        self.lister = PodResources(self.manager, self.resource_devices)
        """The PodResources service (``lister.extra``: another plugin's resources)."""
        self.endpoints: list[Endpoint] = []
        """Every accepted registration, in order (a restart keeps the history)."""
        self.refused: list[str] = []
        """Why each refused Register was refused."""
        self._changed = threading.Condition()
        self._server: grpc.Server | None = None

    @property
    def socket(self) -> Path:
        """``kubelet.sock``."""
        return self.directory / KUBELET_SOCKET

    def start(self) -> None:
        """Serve Registration on ``kubelet.sock``."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)  # type: ignore[no-untyped-call]
        pr_grpc.add_PodResourcesListerServicer_to_server(self.lister, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"unix://{self.socket}")
        self.pod_resources.unlink(missing_ok=True)
        server.add_insecure_port(f"unix://{self.pod_resources}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Stop serving and close the connections to the plugins."""
        if self._server is not None:
            self._server.stop(grace=0).wait()
            self._server = None
        for endpoint in self.endpoints:
            endpoint.channel.close()

    def restart(self) -> None:
        """A kubelet restart: stop, delete every file of the directory, serve again."""
        self.stop()
        for entry in self.directory.iterdir():
            if not entry.is_dir():
                entry.unlink()
        self.start()

    def accept(self, request: pb.RegisterRequest) -> str:
        """Check a RegisterRequest; the refusal's reason, or empty when accepted."""
        if request.version not in SUPPORTED_VERSIONS:
            return f"unsupported API version {request.version!r}"
        if not request.resource_name or "/" not in request.resource_name:
            return f"invalid resource name {request.resource_name!r}"
        socket = self.directory / request.endpoint
        if not socket.exists():
            return f"no socket at {socket}"
        channel = grpc.insecure_channel(f"unix://{socket}")
        endpoint = Endpoint(request, channel, pb_grpc.DevicePluginStub(channel))  # type: ignore[no-untyped-call]
        with self._changed:
            self.endpoints.append(endpoint)
            self._changed.notify_all()
        threading.Thread(target=self._watch, args=(endpoint,), daemon=True).start()
        return ""

    def _watch(self, endpoint: Endpoint) -> None:
        try:
            for response in endpoint.stub.ListAndWatch(pb.Empty()):
                listed = {d.ID: d.health for d in response.devices}
                with self._changed:
                    endpoint.lists.append(listed)
                    self._changed.notify_all()
        except grpc.RpcError as exc:
            with self._changed:
                endpoint.stream_error = f"{exc.code().name}: {exc.details()}"
                self._changed.notify_all()

    def wait(self, probe: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """Wait until ``probe()`` is truthy (re-checked on each change); its value."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not (value := probe()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"kubelet emulator: {what}: not within {timeout_s:g} s")
                self._changed.wait(min(left, 0.2))
            return value

    def latest(self) -> Endpoint:
        """The newest registration (AssertionError when none)."""
        assert self.endpoints, "no plugin registered"
        return self.endpoints[-1]

    def devices(self) -> dict[str, str]:
        """The newest device list of the newest registration."""
        lists = self.latest().lists
        return lists[-1] if lists else {}

    def resource_devices(self) -> dict[str, list[str]]:
        """Every resource's healthy devices, from each resource's newest registration."""
        found: dict[str, list[str]] = {}
        for endpoint in self.endpoints:
            listed = endpoint.lists[-1] if endpoint.lists else {}
            healthy = sorted(d for d, h in listed.items() if h == "Healthy")
            found[endpoint.request.resource_name] = healthy
        return found

    def admit_pod(self, pod: PodSpec) -> dict[str, list[str]]:
        """Admit ``pod``: each GPU container's devices (grpc.RpcError: the pod is rejected)."""
        endpoint = self.latest()
        free = [d for d in self.devices_healthy() if d not in self.manager.in_use()]
        return self.manager.admit(pod, endpoint.stub, endpoint.request.options, free)

    def devices_healthy(self) -> list[str]:
        """The newest registration's healthy devices."""
        return sorted(d for d, h in self.devices().items() if h == "Healthy")

    def admit(
        self, size: int, name: str = "", namespace: str = "ns", container: str = "main"
    ) -> tuple[list[str], pb.ContainerAllocateResponse]:
        """Admit a one-container pod asking for ``size`` devices; its devices and answer."""
        pod = PodSpec(namespace, name or f"pod-{len(self.manager.pods)}", ((container, size),))
        chosen = self.admit_pod(pod)[container]
        return chosen, self.manager.answers[pod.key, container]

    def start_container(self, pod: PodSpec, container: str) -> pb.ContainerAllocateResponse:
        """Start a container as the kubelet does: PreStartContainer, then its saved answer."""
        endpoint = self.latest()
        devices = self.manager.held[pod.key, container]
        if endpoint.request.options.pre_start_required:
            request = pb.PreStartContainerRequest(devices_ids=devices)
            endpoint.stub.PreStartContainer(request, timeout=30)
        return self.manager.answers[pod.key, container]


class _Registration(pb_grpc.RegistrationServicer):
    def __init__(self, kubelet: KubeletEmulator) -> None:
        self.kubelet = kubelet

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:  # noqa: N802
        reason = self.kubelet.accept(request)
        if reason:
            self.kubelet.refused.append(reason)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
        return pb.Empty()


def check_list(listed: dict[str, str]) -> None:
    """AssertionError unless every device ID and health is one the kubelet accepts."""
    for device, health in listed.items():
        assert 0 < len(device) <= MAX_DEVICE_ID, f"device ID {device!r}: 1..63 characters"
        assert health in HEALTH_VALUES, f"device {device}: health {health!r}"
