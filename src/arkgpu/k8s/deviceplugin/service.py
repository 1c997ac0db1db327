"""The DevicePlugin gRPC service: options, ListAndWatch, preferred allocation, Allocate.

State shared with the plugin's loop lives in a :class:`DeviceBoard` (the GPUs
of the last scan, a version that grows on each change); ListAndWatch streams
send the device list at once and again on every change. Allocate calls are
served one at a time, so two containers never take the same pending pod.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator

import grpc

from arkgpu.k8s import contract
from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.deviceplugin import allocating, devices
from arkgpu.k8s.deviceplugin.allocating import AllocationError
from arkgpu.k8s.deviceplugin.apiserver import PodApi
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.containers import container_response, create_container_region
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
        log: Callable[[str], None],
        clock: Callable[[], str] = now_rfc3339,
    ) -> None:
        self.config, self.board, self.pods, self.log, self.clock = config, board, pods, log, clock
        self._allocating = threading.Lock()
        self.allocations = 0
        """Containers allocated so far."""
        self.refusals = 0
        """Allocate calls answered with an error so far."""

    def GetDevicePluginOptions(  # noqa: N802 (the proto's name)
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        """GetPreferredAllocation is served; no PreStartContainer is needed."""
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
        """Devices of the GPUs assigned to the oldest pending pod of the request's size."""
        node = self.config.node_name
        try:
            pending = allocating.pending_pods(self.pods.pods_on_node(node), node)
        except Exception as exc:  # a preference only: any devices will do
            self.log(f"preferred allocation without the API server: {_one_line(exc)}")
            pending = []
        answers = []
        for want in request.container_requests:
            sized = [p for p in pending if len(p.assignment.gpus) == want.allocation_size]
            uuids = sized[0].uuids if sized else ()
            chosen = devices.preferred(
                want.available_deviceIDs, want.must_include_deviceIDs, want.allocation_size, uuids
            )
            answers.append(pb.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return pb.PreferredAllocationResponse(container_responses=answers)

    def Allocate(  # noqa: N802
        self, request: pb.AllocateRequest, context: grpc.ServicerContext
    ) -> pb.AllocateResponse:
        """Regions, environment, mounts and devices for each container of the request;
        FAILED_PRECONDITION with a readable message when no pod or GPU fits."""
        with self._allocating:
            try:
                answers = [self._allocate(list(c.devices_ids)) for c in request.container_requests]
            except AllocationError as exc:
                self.refusals += 1
                self.log(str(exc))
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
            except Exception as exc:  # the API server or the disk: told to the kubelet
                self.refusals += 1
                message = f"arkgpu device plugin: Allocate failed: {_one_line(exc)}"
                self.log(message)
                context.abort(grpc.StatusCode.UNAVAILABLE, message)
        return pb.AllocateResponse(container_responses=answers)

    def _allocate(self, device_ids: list[str]) -> pb.ContainerAllocateResponse:
        node = self.config.node_name
        pending = allocating.pending_pods(self.pods.pods_on_node(node), node)
        chosen = allocating.choose(pending, device_ids)
        if chosen is None:
            raise AllocationError(allocating.not_found_message(node, device_ids))
        allocating.check_gpus(chosen, self.board.snapshot()[1], node)
        region = create_container_region(chosen, self.config.regions_dir)
        self.pods.annotate_pod(
            chosen.pod.namespace, chosen.pod.name, {contract.ANNOTATION_ALLOCATED: self.clock()}
        )
        self.allocations += 1
        self.log(f"allocated pod {chosen.pod.key} container {chosen.container}: region {region}")
        return container_response(chosen, region, self.config.library_path)

    def PreStartContainer(  # noqa: N802
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        """Nothing to do before a container starts (not asked for in the options)."""
        return pb.PreStartContainerResponse()


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def options() -> pb.DevicePluginOptions:
    """The plugin's options: preferred allocation on, PreStartContainer off."""
    return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)
