"""The device plugin API v1beta1 on the wire: the generated stubs, wrapped with types.

``api_pb2`` (messages) has generated type stubs (``api_pb2.pyi``); the
generated service module does not, so its two entry points are called here
only, with types.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2 as pb
from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc

API_VERSION = "v1beta1"
"""The device plugin API version the kubelet supports (``RegisterRequest.version``)."""

__all__ = ["API_VERSION", "DevicePluginServicer", "add_device_plugin", "pb", "register"]

DevicePluginServicer = pb_grpc.DevicePluginServicer
"""Base class of the plugin's service (every method answers UNIMPLEMENTED)."""


def unix_target(socket: Path) -> str:
    """The gRPC address of a Unix socket."""
    return f"unix://{socket.absolute()}"


def add_device_plugin(servicer: pb_grpc.DevicePluginServicer, server: grpc.Server) -> None:
    """Serve ``servicer`` as the DevicePlugin service on ``server``."""
    pb_grpc.add_DevicePluginServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]


def register(kubelet_socket: Path, request: pb.RegisterRequest, timeout_s: float) -> None:
    """Call the kubelet's Registration.Register (grpc.RpcError when it refuses or is gone)."""
    with grpc.insecure_channel(unix_target(kubelet_socket)) as channel:
        stub = pb_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
        stub.Register(request, timeout=timeout_s)
