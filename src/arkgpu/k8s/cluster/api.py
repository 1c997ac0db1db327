"""What ArkGPU asks of the API server, as a Protocol, and errors every adapter raises.

:class:`ClusterApi` is implemented by :class:`arkgpu.k8s.cluster.kube.KubeApi`
(the official ``kubernetes`` client) and by
:class:`arkgpu.k8s.cluster.memory.MemoryApi` (in memory: the benchmark and
the tests). Objects travel as the API's JSON (dicts with the lower-case names),
never as generated model classes: one reader (:mod:`arkgpu.k8s.cluster.objects`)
serves the watch and kube-scheduler's requests alike, and a 1,000-node list
is not turned into a million Python objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

Json = dict[str, Any]
"""An object as the API server's JSON."""

CONFLICT = 409
NOT_FOUND = 404
GONE = 410


class ApiError(Exception):
    """The API server refused (``status`` its HTTP code) or could not be reached (0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status})" if status else message)
        self.status = status


@dataclass(frozen=True)
class Listed:
    """A full list: the objects and the resourceVersion to watch from."""

    items: list[Json]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object."""

    kind: str
    obj: Json


class ClusterApi(Protocol):
    """Lists, watches, a pod read, an annotation patch and the Binding."""

    def list(self, resource: str) -> Listed:
        """Every object of ``resource`` (``nodes``, ``pods`` or ``resourceclaims``, all
        namespaces)."""
        ...

    def watch(self, resource: str, resource_version: str, timeout_s: float) -> Iterator[WatchEvent]:
        """Changes after ``resource_version`` for up to ``timeout_s``; ApiError(410) when that
        version is too old (list again)."""
        ...

    def get_pod(self, namespace: str, name: str) -> Json:
        """One pod."""
        ...

    def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: dict[str, Any]
    ) -> Json:
        """Merges ``annotations`` (None removes a key) into the pod if its UID is still ``uid``
        (else ApiError 409); returns the pod as written."""
        ...

    def bind_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        annotations: dict[str, str] | None = None,
    ) -> None:
        """POSTs the pod's Binding subresource (ApiError 409 if bound or recreated). The
        API server sets ``annotations`` on the pod in the same write (the Binding's
        ``metadata.annotations``): bound with them, or neither."""
        ...
