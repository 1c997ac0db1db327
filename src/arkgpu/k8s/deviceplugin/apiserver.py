"""What the device plugin and the inventory ask of the API server, behind a Protocol.

Three calls: the pods bound to this node, one pod by name (PreStartContainer
reads the assignment of the pod the kubelet names), a merge patch of the node's
annotations. Nothing the kubelet's Allocate waits for goes through here. Unit tests use an
in-memory implementation; :class:`KubernetesApi` is the real one, over the
official ``kubernetes`` client (JSON merge patches of ``metadata.annotations``
only, so nothing else a controller owns is touched).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

REQUEST_TIMEOUT_S = (3.0, 10.0)
"""Connect and read timeouts of each call: a kubelet call waiting on one is never stuck."""
MERGE_PATCH = "application/merge-patch+json"
"""Content type of a JSON merge patch (RFC 7386)."""


@dataclass(frozen=True)
class PodInfo:
    """The parts of a pod Allocate needs."""

    namespace: str
    name: str
    uid: str
    node: str
    """``spec.nodeName`` (empty: not bound)."""
    created: str
    """``metadata.creationTimestamp``, RFC 3339 (sorts in time order)."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[tuple[str, Mapping[str, str]], ...] = ()
    """Each container's name and ``resources.limits``, in order."""
    init_containers: tuple[tuple[str, Mapping[str, str]], ...] = ()
    """The same of each init container."""
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set."""
    phase: str = "Pending"
    """``status.phase`` (``Succeeded`` and ``Failed`` are terminal: a pod the kubelet
    rejected at admission is ``Failed``)."""
    revision: int = 0
    """``metadata.resourceVersion`` as a number (0 when it is not one): among pods created in
    the same second, the order in which they reached the node (creation or binding; the
    kubelet admits them in the order its watch delivers them)."""

    @property
    def key(self) -> str:
        """``namespace/name``, for messages."""
        return f"{self.namespace}/{self.name}"


class PodApi(Protocol):
    """The device plugin's side of the API server."""

    def pods_on_node(self, node: str) -> list[PodInfo]:
        """Every pod bound to ``node``."""
        ...

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        """The pod ``namespace/name`` (None when there is none)."""
        ...


class NodeApi(Protocol):
    """The inventory's side of the API server."""

    def annotate_node(self, node: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into the node's."""
        ...


class KubernetesApi:
    """:class:`PodApi` and :class:`NodeApi` over the official ``kubernetes`` client."""

    def __init__(self, kubeconfig: Path | None) -> None:
        """The API server of ``kubeconfig`` (None: the pod's service account)."""
        from kubernetes import client  # noqa: PLC0415 (the [k8s] extra)

        from arkgpu.k8s.cluster.kube import load_client  # noqa: PLC0415

        self._client = load_client(kubeconfig)
        self._core = client.CoreV1Api(self._client)

    def pods_on_node(self, node: str) -> list[PodInfo]:
        """Every pod bound to ``node`` (a field selector on ``spec.nodeName``)."""
        listed = self._core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node}", _request_timeout=REQUEST_TIMEOUT_S
        )
        return [_pod_info(p) for p in listed.items]

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        """GET the pod (None on 404)."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        try:
            found = self._core.read_namespaced_pod(
                name, namespace, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _pod_info(found)

    def annotate_node(self, node: str, annotations: dict[str, str]) -> None:
        """A JSON merge patch of the node's annotations."""
        body = {"metadata": {"annotations": annotations}}
        self._core.patch_node(node, body, _content_type=MERGE_PATCH)

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()  # type: ignore[no-untyped-call]


def _pod_info(pod: Any) -> PodInfo:
    meta, spec = pod.metadata, pod.spec
    created = meta.creation_timestamp
    containers = _limits(spec.containers)
    return PodInfo(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid or "",
        node=spec.node_name or "",
        created=created.isoformat() if created is not None else "",
        annotations=dict(meta.annotations or {}),
        containers=containers,
        init_containers=_limits(spec.init_containers),
        deleting=meta.deletion_timestamp is not None,
        phase=(pod.status.phase if pod.status is not None else None) or "Pending",
        revision=int(meta.resource_version) if (meta.resource_version or "").isdigit() else 0,
    )


def _limits(containers: Any) -> tuple[tuple[str, dict[str, str]], ...]:
    return tuple(
        (c.name, dict((c.resources.limits if c.resources else None) or {}))
        for c in containers or []
    )
