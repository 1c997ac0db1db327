"""The DevicePlugin gRPC service: options, ListAndWatch, preferred allocation, Allocate,
PreStartContainer.

State shared with the plugin's loop lives in a :class:`DeviceBoard` (the GPUs
of the last scan, a version that grows on each change); ListAndWatch streams
send the device list at once and again on every change. Allocate depends on
nothing off the node (devices in, region and answer out); PreStartContainer
asks the kubelet's PodResources API whose devices they are and the API server
for that pod's assignment (:mod:`arkgpu.k8s.deviceplugin.prestart`).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

import grpc

from arkgpu.k8s import contract
from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.deviceplugin import allocating, devices, prestart
from arkgpu.k8s.deviceplugin.allocating import AllocationError
from arkgpu.k8s.deviceplugin.apiserver import PodApi, PodInfo
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.containers import container_response, open_region
from arkgpu.k8s.deviceplugin.podresources import DeviceHolders
from arkgpu.k8s.deviceplugin.wire import DevicePluginServicer, pb

WAKE_S = 0.5
"""How often an idle ListAndWatch stream checks that its call and the plugin still run, s."""


class DeviceBoard:
    """The GPUs as last scanned, with change notification."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._gpus: tuple[InventoryGpu, ...] = ()
        self._version = 0
        self.stopped = threading.Event()
        """Set when the plugin stops: open streams end."""

    def update(self, gpus: tuple[InventoryGpu, ...]) -> bool:
        """Take a new scan; True (and streams woken) when it differs from the last."""
        with self._changed:
            if gpus == self._gpus:
                return False
            self._gpus, self._version = gpus, self._version + 1
            self._changed.notify_all()
            return True

    def snapshot(self) -> tuple[int, tuple[InventoryGpu, ...]]:
        """The version and the GPUs."""
        with self._changed:
            return self._version, self._gpus

    def wait(self, version: int, timeout_s: float) -> None:
        """Until the version differs from ``version``, the plugin stops, or ``timeout_s``."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._version != version or self.stopped.is_set(), timeout_s
            )


def now_rfc3339() -> str:
    """The current UTC time, RFC 3339 to the second."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class DevicePluginService(DevicePluginServicer):
    """The DevicePlugin service of one node."""

    def __init__(
        self,
        config: DevicePluginConfig,
        board: DeviceBoard,
        pods: PodApi,
        holders: DeviceHolders,
        log: Callable[[str], None],
    ) -> None:
        self.config, self.board, self.pods, self.holders, self.log = (
            config,
            board,
            pods,
            holders,
            log,
        )
        self.lock = threading.Lock()
        """Held while a region is created or written (never across a call off the node)."""
        self.allocations = 0
        """Allocate answers given so far (one per container request)."""
        self.refusals = 0
        """Allocate and PreStartContainer calls answered with an error so far."""
        self.prestarts = 0
        """Containers given their pod's limits at PreStartContainer so far."""
        self.mismatches = 0
        """Containers whose allocated GPUs differ from their pod's assigned GPUs."""

    def GetDevicePluginOptions(  # noqa: N802 (the proto's name)
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        """GetPreferredAllocation is served; PreStartContainer is required."""
        return options()

    def ListAndWatch(  # noqa: N802
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        """The devices now, then again after each change, while the call and the plugin run."""
        sent = -1
        while context.is_active() and not self.board.stopped.is_set():
            version, gpus = self.board.snapshot()
            if version != sent:
                listed = devices.virtual_devices(gpus, self.config.split_count)
                yield pb.ListAndWatchResponse(
                    devices=[pb.Device(ID=d.id, health=d.health) for d in listed]
                )
                sent = version
            self.board.wait(version, WAKE_S)

    def GetPreferredAllocation(  # noqa: N802
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        """Devices of the GPUs assigned to the first pod, in the kubelet's admission order,
        that waits for that many devices (a preference only: any devices will do)."""
        waiting = self._waiting()
        node = self.config.node_name
        answers = []
        for want in request.container_requests:
            uuids = allocating.preferred_uuids(waiting, node, want.allocation_size)
            chosen = devices.preferred(
                want.available_deviceIDs, want.must_include_deviceIDs, want.allocation_size, uuids
            )
            answers.append(pb.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return pb.PreferredAllocationResponse(container_responses=answers)

    def _waiting(self) -> list[PodInfo]:
        node = self.config.node_name
        try:
            holding = {h.pod_key for h in self.holders.holders(contract.RESOURCE_GPU)}
            return allocating.waiting_pods(self.pods.pods_on_node(node), node, holding)
        except Exception as exc:  # the API server or the kubelet: no preference
            self.log(f"preferred allocation without a preference: {_one_line(exc)}")
            return []

    def Allocate(  # noqa: N802
        self, request: pb.AllocateRequest, context: grpc.ServicerContext
    ) -> pb.AllocateResponse:
        """A region per container named after its devices, and what the container gets;
        no call leaves the node, so a repeated Allocate gets the same answer."""
        try:
            with self.lock:
                answers = [self._allocate(list(c.devices_ids)) for c in request.container_requests]
        except Exception as exc:
            self._refuse(context, exc)
        return pb.AllocateResponse(container_responses=answers)

    def _allocate(self, device_ids: list[str]) -> pb.ContainerAllocateResponse:
        gpus = self.board.snapshot()[1]
        allocating.check_devices(device_ids, gpus)
        uuids = allocating.gpus_of(device_ids)
        key = allocating.region_key(device_ids)
        region = open_region(self.config.regions_dir, key, len(uuids))
        self.allocations += 1
        self.log(f"allocated {len(device_ids)} device(s) on {', '.join(uuids)}: region {key}")
        return container_response(self.config, uuids, _minors(gpus, uuids), region)

    def PreStartContainer(  # noqa: N802
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        """Give the region of the container holding the devices its pod's limits (see
        :mod:`arkgpu.k8s.deviceplugin.prestart`); an error keeps the container from starting
        and the kubelet tries again at its next sync of the pod."""
        try:
            done = prestart.settle(self, list(request.devices_ids))
        except Exception as exc:
            self._refuse(context, exc)
        self.prestarts += 1
        if done.mismatch:
            self.mismatches += 1
        self.log(done.message)
        return pb.PreStartContainerResponse()

    def _refuse(self, context: grpc.ServicerContext, exc: Exception) -> NoReturn:
        self.refusals += 1
        if isinstance(exc, AllocationError):
            self.log(str(exc))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        message = f"arkgpu device plugin: {_one_line(exc)}"
        self.log(message)
        context.abort(grpc.StatusCode.UNAVAILABLE, message)


def _minors(gpus: Sequence[InventoryGpu], uuids: Sequence[str]) -> list[int]:
    minor = {g.uuid: g.index if g.minor is None else g.minor for g in gpus}
    return [minor[u] for u in uuids if u in minor]


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def options() -> pb.DevicePluginOptions:
    """The plugin's options: preferred allocation on, PreStartContainer required."""
    return pb.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)
