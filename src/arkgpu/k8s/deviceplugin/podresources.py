"""The kubelet's PodResources API v1: which pod and container hold which devices.

The kubelet serves ``PodResourcesLister`` on
``/var/lib/kubelet/pod-resources/kubelet.sock`` (stubs generated from the
vendored ``podresources/v1/api.proto``, :mod:`arkgpu.k8s.proto`). ``List``
names, for every pod the kubelet knows, each container's devices per resource,
as recorded at Allocate (and kept in the kubelet's checkpoint across restarts);
``GetAllocatableResources`` names every device the kubelet can allocate, whichever
plugin advertised it. The plugin asks at PreStartContainer (whose pod is this?),
at region collection (which regions still have a container?) and to notice a
second plugin holding ``nvidia.com/gpu``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import grpc

from arkgpu.k8s.proto.podresources.v1 import api_pb2 as prpb
from arkgpu.k8s.proto.podresources.v1 import api_pb2_grpc as prpb_grpc

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
"""Where the kubelet serves the PodResources API."""


@dataclass(frozen=True)
class Holder:
    """One container's devices of one resource, as the kubelet recorded them."""

    namespace: str
    pod: str
    container: str
    devices: frozenset[str]

    @property
    def pod_key(self) -> tuple[str, str]:
        """``(namespace, pod)``."""
        return self.namespace, self.pod


class DeviceHolders(Protocol):
    """The plugin's side of the PodResources API."""

    def holders(self, resource: str) -> list[Holder]:
        """Every container holding devices of ``resource`` (OSError, grpc.RpcError)."""
        ...

    def allocatable(self, resource: str) -> frozenset[str]:
        """Every device of ``resource`` the kubelet can allocate."""
        ...


class PodResourcesClient:
    """:class:`DeviceHolders` over the kubelet's Unix socket (one channel per call: the
    kubelet's restart replaces the socket)."""

    def __init__(self, socket: Path, timeout_s: float = 5.0) -> None:
        self.socket, self.timeout_s = socket, timeout_s

    def _stub(self, channel: grpc.Channel) -> prpb_grpc.PodResourcesListerStub:
        return prpb_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]

    def holders(self, resource: str) -> list[Holder]:
        """``List``, reduced to the containers holding ``resource``."""
        with grpc.insecure_channel(f"unix://{self.socket.absolute()}") as channel:
            answer = self._stub(channel).List(
                prpb.ListPodResourcesRequest(), timeout=self.timeout_s
            )
        return holders_of(answer, resource)

    def allocatable(self, resource: str) -> frozenset[str]:
        """``GetAllocatableResources``, reduced to ``resource``."""
        with grpc.insecure_channel(f"unix://{self.socket.absolute()}") as channel:
            answer = self._stub(channel).GetAllocatableResources(
                prpb.AllocatableResourcesRequest(), timeout=self.timeout_s
            )
        return frozenset(
            d
            for group in answer.devices
            if group.resource_name == resource
            for d in group.device_ids
        )


def holders_of(answer: prpb.ListPodResourcesResponse, resource: str) -> list[Holder]:
    """The containers of a List answer holding devices of ``resource``."""
    found = []
    for pod in answer.pod_resources:
        for container in pod.containers:
            devices = frozenset(
                d for g in container.devices if g.resource_name == resource for d in g.device_ids
            )
            if devices:
                found.append(Holder(pod.namespace, pod.name, container.name, devices))
    return found
