"""The kubelet's side of a DRA driver, built from the same vendored protos.

What the kubelet does (pkg/kubelet/pluginmanager and cm/dra in Kubernetes 1.37):
its plugin watcher finds a socket in ``plugins_registry``, calls
``Registration.GetInfo``, accepts a plugin of type ``DRAPlugin`` offering
``v1.DRAPlugin``, answers ``NotifyRegistrationStatus``, and later dials the
plugin's endpoint for ``NodePrepareResources`` / ``NodeUnprepareResources``.
Everything goes over real Unix sockets with grpcio.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from arkgpu.k8s.dra import wire
from arkgpu.k8s.dra.wire import dra, reg

TIMEOUT_S = 30.0
"""Seconds any one call may take (a loaded 2-core machine)."""


@dataclass(frozen=True)
class RegisteredPlugin:
    """A plugin the emulated kubelet accepted."""

    name: str
    endpoint: Path


class KubeletError(AssertionError):
    """The plugin did something the kubelet refuses."""


def register(registry_dir: Path, timeout_s: float = TIMEOUT_S) -> RegisteredPlugin:
    """Wait for a registration socket, validate the plugin as the kubelet does, accept it."""
    deadline = time.monotonic() + timeout_s
    while not (sockets := sorted(registry_dir.glob("*.sock"))):
        if time.monotonic() > deadline:
            raise KubeletError(f"no registration socket in {registry_dir}")
        time.sleep(0.05)
    with grpc.insecure_channel(wire.unix_target(sockets[0])) as channel:
        stub = wire.registration_stub(channel)
        info = stub.GetInfo(reg.InfoRequest(), timeout=timeout_s, wait_for_ready=True)
        problem = _refusal(info)
        stub.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=not problem, error=problem), timeout=timeout_s
        )
    if problem:
        raise KubeletError(problem)
    return RegisteredPlugin(info.name, Path(info.endpoint))


def _refusal(info: reg.PluginInfo) -> str:
    if info.type != wire.PLUGIN_TYPE:
        return f"plugin type {info.type!r} is not {wire.PLUGIN_TYPE}"
    if wire.DRA_SERVICE not in info.supported_versions:
        return f"none of {list(info.supported_versions)} is {wire.DRA_SERVICE}"
    if not Path(info.endpoint).is_absolute():
        return f"endpoint {info.endpoint!r} is not an absolute socket path"
    return ""


def _claims(refs: list[tuple[str, str, str]]) -> list[dra.Claim]:
    return [dra.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in refs]


def prepare(
    plugin: RegisteredPlugin, refs: list[tuple[str, str, str]]
) -> dra.NodePrepareResourcesResponse:
    """NodePrepareResources for claims given as (namespace, name, uid)."""
    with grpc.insecure_channel(wire.unix_target(plugin.endpoint)) as channel:
        request = dra.NodePrepareResourcesRequest(claims=_claims(refs))
        response: dra.NodePrepareResourcesResponse = wire.dra_stub(channel).NodePrepareResources(
            request, timeout=TIMEOUT_S, wait_for_ready=True
        )
        return response


def unprepare(
    plugin: RegisteredPlugin, refs: list[tuple[str, str, str]]
) -> dra.NodeUnprepareResourcesResponse:
    """NodeUnprepareResources for claims given as (namespace, name, uid)."""
    with grpc.insecure_channel(wire.unix_target(plugin.endpoint)) as channel:
        request = dra.NodeUnprepareResourcesRequest(claims=_claims(refs))
        response: dra.NodeUnprepareResourcesResponse = wire.dra_stub(
            channel
        ).NodeUnprepareResources(request, timeout=TIMEOUT_S, wait_for_ready=True)
        return response
