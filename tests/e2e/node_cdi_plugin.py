"""A stand-in for NVIDIA's device plugin in CDI mode, for the real node's own tests.

NVIDIA's plugin with ``--device-list-strategy=cdi-cri`` advertises ``nvidia.com/gpu``
and answers Allocate with CDI device ids only (``nvidia.com/gpu=<uuid>``); the
kubelet passes them to containerd, which applies the toolkit's spec. This
stand-in does the same for one fake GPU under a test resource name
(:data:`RESOURCE`, so it never meets ArkGPU's plugin), advertised as ``replicas``
devices as NVIDIA's time-slicing does (``<uuid>::<k>``, all one CDI device), so
that several containers share the GPU. It tests the node's path
kubelet -> CRI -> CDI -> the fake driver, not ArkGPU. It serves over the kubelet's
real device-plugin socket folder (``/var/lib/kubelet/device-plugins``, a
constant of the kubelet).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc

from arkgpu.k8s.deviceplugin.wire import (
    API_VERSION,
    DevicePluginServicer,
    add_device_plugin,
    pb,
    register,
)

from .node_fakegpu import FakeGpuNode

RESOURCE = "e2e.arkgpu.io/cdi-gpu"
"""The stand-in's extended resource (one device per fake GPU)."""
KUBELET_DIR = Path("/var/lib/kubelet/device-plugins")
"""The kubelet's device-plugin folder (fixed in the kubelet, whatever its --root-dir)."""
SOCKET_NAME = "arkgpu-e2e-cdi.sock"


class _CdiPlugin(DevicePluginServicer):
    def __init__(self, gpu: FakeGpuNode, index: int, replicas: int) -> None:
        self.uuid = gpu.uuid(index)
        self.gpu = gpu
        self.replicas = replicas
        self.stopped = threading.Event()

    def GetDevicePluginOptions(self, request: pb.Empty, context: object) -> pb.DevicePluginOptions:  # noqa: N802
        return pb.DevicePluginOptions()

    def ListAndWatch(  # noqa: N802
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        devices = [
            pb.Device(ID=f"{self.uuid}::{k}", health="Healthy") for k in range(self.replicas)
        ]
        yield pb.ListAndWatchResponse(devices=devices)
        while context.is_active() and not self.stopped.wait(1.0):
            pass

    def Allocate(self, request: pb.AllocateRequest, context: object) -> pb.AllocateResponse:  # noqa: N802
        responses = [
            pb.ContainerAllocateResponse(
                cdi_devices=[pb.CDIDevice(name=self.gpu.cdi_id(self.uuid))] if c.devices_ids else []
            )
            for c in request.container_requests
        ]
        return pb.AllocateResponse(container_responses=responses)


@contextmanager
def serving_cdi_plugin(gpu: FakeGpuNode, gpu_index: int, replicas: int) -> Iterator[str]:
    """The stand-in for GPU ``gpu_index``, registered with the node's kubelet; yields its
    resource name."""
    socket = KUBELET_DIR / SOCKET_NAME
    socket.unlink(missing_ok=True)
    plugin = _CdiPlugin(gpu, gpu_index, replicas)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add_device_plugin(plugin, server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        request = pb.RegisterRequest(
            version=API_VERSION, endpoint=SOCKET_NAME, resource_name=RESOURCE
        )
        register(KUBELET_DIR / "kubelet.sock", request, timeout_s=30.0)
        yield RESOURCE
    finally:
        plugin.stopped.set()
        server.stop(grace=2).wait()
        socket.unlink(missing_ok=True)
