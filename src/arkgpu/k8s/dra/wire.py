"""The kubelet's DRA v1 and plugin registration APIs on the wire: generated stubs, typed.

The message modules have generated type stubs (``api_pb2.pyi``); the generated
service modules do not, so their entry points are called here only, with types.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from arkgpu.k8s.proto_dra.dra.v1 import api_pb2 as dra
from arkgpu.k8s.proto_dra.dra.v1 import api_pb2_grpc as dra_grpc
from arkgpu.k8s.proto_dra.pluginregistration.v1 import api_pb2 as reg
from arkgpu.k8s.proto_dra.pluginregistration.v1 import api_pb2_grpc as reg_grpc

__all__ = [
    "DRA_SERVICE",
    "PLUGIN_TYPE",
    "DraServicer",
    "RegistrationServicer",
    "add_dra",
    "add_registration",
    "dra",
    "dra_stub",
    "reg",
    "registration_stub",
    "unix_target",
]

PLUGIN_TYPE = "DRAPlugin"
"""``PluginInfo.type`` of a DRA driver (the kubelet's pluginregistration constant)."""
DRA_SERVICE = "v1.DRAPlugin"
"""The gRPC service this plugin offers, as the kubelet names it in ``supported_versions``."""

DraServicer = dra_grpc.DRAPluginServicer
"""Base class of the DRA service (every method answers UNIMPLEMENTED)."""
RegistrationServicer = reg_grpc.RegistrationServicer
"""Base class of the registration service."""


def unix_target(socket: Path) -> str:
    """The gRPC address of a Unix socket."""
    return f"unix://{socket.absolute()}"


def add_dra(servicer: Any, server: grpc.Server) -> None:
    """Serve ``servicer`` as the DRAPlugin service on ``server``."""
    dra_grpc.add_DRAPluginServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]


def add_registration(servicer: Any, server: grpc.Server) -> None:
    """Serve ``servicer`` as the Registration service on ``server``."""
    reg_grpc.add_RegistrationServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]


def dra_stub(channel: grpc.Channel) -> Any:
    """A client of the DRAPlugin service (the kubelet's side, and tests)."""
    return dra_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]


def registration_stub(channel: grpc.Channel) -> Any:
    """A client of the Registration service (the kubelet's plugin watcher, and tests)."""
    return reg_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
