"""The kubelet's device manager, emulated: which container holds which devices.

Follows the kubelet (pkg/kubelet/cm/devicemanager) where a device plugin can
tell the difference:

- a pod's init containers are allocated first, then its app containers; an app
  container takes its devices from the init containers' first (the kubelet's
  "devices to reuse"), so an init container and the app container after it
  share devices; only the devices still needed are offered to
  GetPreferredAllocation, with the reused ones as ``must_include``;
- each container is allocated with its own Allocate call; a failed one rejects
  the pod: its devices are freed and it never becomes active;
- the devices and the answer of each container are kept (the kubelet's
  checkpoint) and survive a kubelet restart;
- PodResources ``List`` names the active pods and, for each app container, its
  devices per resource (regular init containers are not listed, as in the
  kubelet); ``Get`` one pod; ``GetAllocatableResources`` every healthy device
  of every registered resource.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2 as pb
from arkgpu.k8s.proto.podresources.v1 import api_pb2 as prpb
from arkgpu.k8s.proto.podresources.v1 import api_pb2_grpc as pr_grpc

RESOURCE = "nvidia.com/gpu"
Key = tuple[str, str]


@dataclass(frozen=True)
class PodSpec:
    """A pod as the kubelet admits it: containers' names and ``nvidia.com/gpu`` counts."""

    namespace: str
    name: str
    containers: tuple[tuple[str, int], ...]
    init: tuple[tuple[str, int], ...] = ()

    @property
    def key(self) -> Key:
        return self.namespace, self.name


class DeviceManager:
    """Pods, their containers' devices and saved answers (see the module's text)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pods: dict[Key, PodSpec] = {}
        """Active pods (admitted, not removed)."""
        self.held: dict[tuple[Key, str], list[str]] = {}
        self.answers: dict[tuple[Key, str], pb.ContainerAllocateResponse] = {}
        self.allocate_calls = 0

    def in_use(self) -> set[str]:
        """Devices held by the containers of active pods."""
        with self.lock:
            return {d for (key, _), ds in self.held.items() if key in self.pods for d in ds}

    def remove(self, key: Key) -> None:
        """The pod is gone: its devices are free again."""
        with self.lock:
            self.pods.pop(key, None)
            for held in [k for k in self.held if k[0] == key]:
                del self.held[held], self.answers[held]

    def admit(
        self, pod: PodSpec, stub: Any, options: pb.DevicePluginOptions, free: list[str]
    ) -> dict[str, list[str]]:
        """Allocate every GPU container of ``pod`` in the kubelet's order."""
        reuse: list[str] = []
        got: dict[str, list[str]] = {}
        try:
            for name, size in pod.init + pod.containers:
                if size == 0:
                    continue
                init = (name, size) in pod.init
                devices = self._choose(stub, options, free, reuse, size)
                got[name] = self._allocate(stub, pod.key, name, devices)
                free = [d for d in free if d not in devices]
                if init:
                    reuse = sorted(set(reuse) | set(devices))
                else:
                    reuse = [d for d in reuse if d not in devices]
        except grpc.RpcError:
            self.remove(pod.key)
            raise
        with self.lock:
            self.pods[pod.key] = pod
        return got

    def _choose(
        self,
        stub: Any,
        options: pb.DevicePluginOptions,
        free: list[str],
        reuse: list[str],
        size: int,
    ) -> list[str]:
        must = reuse[:size]
        if len(must) == size:
            return must
        available = must + [d for d in free if d not in must]
        assert len(available) >= size, f"only {len(available)} free healthy devices"
        if not options.get_preferred_allocation_available:
            return available[:size]
        want = pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
        )
        answer = stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(container_requests=[want]), timeout=30
        )
        preferred = list(answer.container_responses[0].deviceIDs)
        if len(preferred) == size and set(must) <= set(preferred) <= set(available):
            return preferred
        return available[:size]

    def _allocate(self, stub: Any, key: Key, name: str, devices: list[str]) -> list[str]:
        request = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=devices)]
        )
        with self.lock:
            self.allocate_calls += 1
        response = stub.Allocate(request, timeout=30)
        with self.lock:
            self.held[key, name] = devices
            self.answers[key, name] = response.container_responses[0]
        return devices

    def pod_resources(self, pod: PodSpec) -> prpb.PodResources:
        """``pod`` as PodResources lists it (app containers only)."""
        containers = []
        for name, _ in pod.containers:
            held = self.held.get((pod.key, name), [])
            devices = (
                [prpb.ContainerDevices(resource_name=RESOURCE, device_ids=held)] if held else []
            )
            containers.append(prpb.ContainerResources(name=name, devices=devices))
        return prpb.PodResources(name=pod.name, namespace=pod.namespace, containers=containers)


class PodResources(pr_grpc.PodResourcesListerServicer):
    """The PodResources API v1 over a :class:`DeviceManager`."""

    def __init__(self, manager: DeviceManager, devices: Callable[[], dict[str, list[str]]]) -> None:
        self.manager, self.devices = manager, devices
        self.extra: dict[str, list[str]] = {}
        """Devices of resources registered by other plugins (GetAllocatableResources)."""

    def List(self, request: Any, context: grpc.ServicerContext) -> prpb.ListPodResourcesResponse:  # noqa: N802
        with self.manager.lock:
            pods = list(self.manager.pods.values())
            return prpb.ListPodResourcesResponse(
                pod_resources=[self.manager.pod_resources(p) for p in pods]
            )

    def Get(self, request: Any, context: grpc.ServicerContext) -> prpb.GetPodResourcesResponse:  # noqa: N802
        with self.manager.lock:
            pod = self.manager.pods.get((request.pod_namespace, request.pod_name))
            if pod is None:
                context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")
            return prpb.GetPodResourcesResponse(pod_resources=self.manager.pod_resources(pod))

    def GetAllocatableResources(  # noqa: N802
        self, request: Any, context: grpc.ServicerContext
    ) -> prpb.AllocatableResourcesResponse:
        groups = {**self.devices(), **self.extra}
        return prpb.AllocatableResourcesResponse(
            devices=[
                prpb.ContainerDevices(resource_name=r, device_ids=d) for r, d in groups.items()
            ]
        )
