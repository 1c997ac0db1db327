"""The kubelet plugin: plugin registration and the DRA v1 service over Unix sockets.

The kubelet's plugin watcher finds ``<registry_dir>/<driver>-reg.sock``, asks
``GetInfo`` (type ``DRAPlugin``, our driver name, the DRA socket, service
``v1.DRAPlugin``) and reports back with ``NotifyRegistrationStatus``; it then calls
``NodePrepareResources`` before a pod's containers start and
``NodeUnprepareResources`` once the pod is gone, on ``<plugin_dir>/dra.sock``.

Prepare reads each claim from the API server (the request carries only namespace,
name and UID), checks its UID, reads the pods the claim is reserved for and refuses
a claim a container of theirs would use beside another group of this driver's devices
(:func:`arkgpu.k8s.dra.grouping.clash`: two environments and region mounts would
clash), and hands the shares to :class:`Preparer`. A claim that fails gets an
``error`` in its response (one line: the kubelet puts it in the pod's events) and
the others go on (the kubelet retries). Calls are serialised: the kubelet may retry
while a first call runs.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc

from arkgpu.k8s.dra import wire
from arkgpu.k8s.dra.claims import ClaimError, Share, shares
from arkgpu.k8s.dra.grouping import clash
from arkgpu.k8s.dra.preparing import Preparer
from arkgpu.k8s.dra.publishing import read_or_none
from arkgpu.k8s.dra.wire import dra, reg


class ClaimSource(Protocol):
    """Where Prepare reads claims (the API server; a dict in unit tests)."""

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The claim as JSON, or None when there is none."""
        ...


class KubernetesClaims:
    """:class:`ClaimSource` over the official client, read raw (every field kept)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client  # noqa: PLC0415 (the k8s extra, loaded when used)

        self._api: Any = client.ResourceV1Api(api_client)
        self._exception = client.ApiException

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The claim; None on 404."""
        return read_or_none(
            self._api.read_namespaced_resource_claim, self._exception, name, namespace
        )


class PodSource(Protocol):
    """Where Prepare reads the pods a claim is reserved for (the API server; a dict in unit
    tests)."""

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as JSON, or None when there is none."""
        ...


class KubernetesPods:
    """:class:`PodSource` over the official client, read raw."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client  # noqa: PLC0415 (the k8s extra, loaded when used)

        self._api: Any = client.CoreV1Api(api_client)
        self._exception = client.ApiException

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod; None on 404."""
        return read_or_none(self._api.read_namespaced_pod, self._exception, name, namespace)


@dataclass
class DraService(wire.DraServicer):
    """NodePrepareResources and NodeUnprepareResources."""

    claims: ClaimSource
    preparer: Preparer
    driver: str
    pods: PodSource
    lock: threading.Lock = field(default_factory=threading.Lock)
    prepared: int = 0
    """Claims prepared (a retried Prepare of a prepared claim counts again)."""
    prepare_errors: int = 0
    """Claims whose Prepare answered an error."""
    unprepared: int = 0
    """Claims unprepared."""
    unprepare_errors: int = 0
    """Claims whose Unprepare answered an error."""

    def NodePrepareResources(  # noqa: N802 (the gRPC method's name)
        self, request: dra.NodePrepareResourcesRequest, context: Any
    ) -> dra.NodePrepareResourcesResponse:
        """Prepare every claim of the request; an error per claim that fails."""
        response = dra.NodePrepareResourcesResponse()
        with self.lock:
            for claim in request.claims:
                result = self._prepare(claim)
                self.prepared += not result.error
                self.prepare_errors += bool(result.error)
                response.claims[claim.uid].CopyFrom(result)
        return response

    def NodeUnprepareResources(  # noqa: N802
        self, request: dra.NodeUnprepareResourcesRequest, context: Any
    ) -> dra.NodeUnprepareResourcesResponse:
        """Remove every claim's regions and CDI spec."""
        response = dra.NodeUnprepareResourcesResponse()
        with self.lock:
            for claim in request.claims:
                result = dra.NodeUnprepareResourceResponse()
                try:
                    self.preparer.unprepare(claim.uid)
                except OSError as exc:
                    result.error = f"unprepare {claim.namespace}/{claim.name}: {exc}"
                self.unprepared += not result.error
                self.unprepare_errors += bool(result.error)
                response.claims[claim.uid].CopyFrom(result)
        return response

    def _prepare(self, ref: dra.Claim) -> dra.NodePrepareResourceResponse:
        where = f"claim {ref.namespace}/{ref.name}"
        try:
            claim = self.claims.get(ref.namespace, ref.name)
            if claim is None:
                raise ClaimError(f"{where}: not found")
            uid = claim.get("metadata", {}).get("uid")
            if uid != ref.uid:
                raise ClaimError(f"{where}: has UID {uid}, the kubelet asked for {ref.uid}")
            ours = shares(claim, self.driver)
            self._check_pods(claim, ours)
            prepared = self.preparer.prepare(claim, ours)
        except (ClaimError, OSError) as exc:
            return dra.NodePrepareResourceResponse(error=" ".join(str(exc).split()))
        devices = [
            dra.Device(
                request_names=[p.share.base_request],  # a container names the main one
                pool_name=p.share.pool,
                device_name=p.share.device,
                cdi_device_ids=[p.cdi_id],
                share_id=p.share.share_id or None,
            )
            for p in prepared
        ]
        return dra.NodePrepareResourceResponse(devices=devices)

    def _check_pods(self, claim: dict[str, Any], ours: list[Share]) -> None:
        """ClaimError when a container of a pod the claim is reserved for would get devices
        of two groups (a read of the API server that fails is an error too: retried)."""
        meta = claim["metadata"]
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        mine = list(dict.fromkeys(s.base_request for s in ours))

        def requests_of(other: str) -> list[str]:
            return mine if other == name else self._requests_of(namespace, other)

        for pod_name, uid in reserved_for(claim):
            try:
                pod = self.pods.get(namespace, pod_name)
            except Exception as exc:  # the API server: one line, and the kubelet retries
                what = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                raise ClaimError(
                    f"claim {namespace}/{name}: reading pod {pod_name}: {what}"
                ) from None
            if pod is None or (pod.get("metadata") or {}).get("uid") != uid:
                continue
            problem = clash(pod, requests_of, self.driver)
            if problem:
                raise ClaimError(f"claim {namespace}/{name}: {problem}")

    def _requests_of(self, namespace: str, name: str) -> list[str]:
        """The main requests of this driver's results in another claim of the pod."""
        other = self.claims.get(namespace, name)
        try:
            found = shares(other, self.driver) if other else []
        except ClaimError:  # not allocated (yet): no devices to clash with
            return []
        return list(dict.fromkeys(s.base_request for s in found))


def reserved_for(claim: dict[str, Any]) -> list[tuple[str, str]]:
    """Name and UID of each pod the claim is reserved for (``status.reservedFor``)."""
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return [
        (str(r["name"]), str(r["uid"]))
        for r in reserved
        if r.get("resource") == "pods" and r.get("name") and r.get("uid")
    ]


@dataclass
class RegistrationService(wire.RegistrationServicer):
    """What the kubelet's plugin watcher asks."""

    driver: str
    endpoint: Path
    registered: threading.Event = field(default_factory=threading.Event)
    error: str = ""
    """The kubelet's reason when it refused us last ("" when it took us)."""
    registrations: int = 0
    """Times the kubelet reported us registered (once per kubelet start)."""

    def GetInfo(self, request: reg.InfoRequest, context: Any) -> reg.PluginInfo:  # noqa: N802
        """Type, name, DRA socket and the service version offered."""
        return reg.PluginInfo(
            type=wire.PLUGIN_TYPE,
            name=self.driver,
            endpoint=str(self.endpoint),
            supported_versions=[wire.DRA_SERVICE],
        )

    def NotifyRegistrationStatus(  # noqa: N802
        self, request: reg.RegistrationStatus, context: Any
    ) -> reg.RegistrationStatusResponse:
        """Remember whether the kubelet took us."""
        self.error = request.error
        if request.plugin_registered:
            self.registrations += 1
            self.registered.set()
        return reg.RegistrationStatusResponse()


def serve_plugin(
    registry_socket: Path, dra_socket: Path, service: DraService
) -> tuple[grpc.Server, RegistrationService]:
    """Start both services; stale socket files of an earlier run are removed first."""
    for socket in (registry_socket, dra_socket):
        socket.parent.mkdir(parents=True, exist_ok=True)
        socket.unlink(missing_ok=True)
    registration = RegistrationService(service.driver, dra_socket)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    wire.add_dra(service, server)
    wire.add_registration(registration, server)
    for socket in (dra_socket, registry_socket):
        server.add_insecure_port(wire.unix_target(socket))
    server.start()
    return server, registration
