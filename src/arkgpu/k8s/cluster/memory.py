"""An API server in memory: pods and nodes in dicts, with the checks the real one makes.

For the extender's benchmark (binds without a network) and the tests. Writes
bump one resourceVersion counter, as etcd's revision; the watch replays the
changes kept since a version (older: 410 Gone), then returns.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from typing import Any

from arkgpu.k8s.cluster.api import CONFLICT, GONE, NOT_FOUND, ApiError, Json, Listed, WatchEvent

RESOURCES = ("nodes", "pods", "resourceclaims")
"""What it stores (claims keyed ``namespace/name``, as pods)."""


class MemoryApi:
    """Implements :class:`~arkgpu.k8s.cluster.api.ClusterApi` in memory."""

    def __init__(self, keep_events: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._objects: dict[str, dict[str, Json]] = {r: {} for r in RESOURCES}
        self._events: dict[str, list[tuple[int, WatchEvent]]] = {r: [] for r in RESOURCES}
        self._revision = 0
        self._keep = keep_events
        self.writes = 0
        """Patches and bindings accepted (the benchmark's check)."""

    def put(self, resource: str, obj: Json) -> Json:
        """Creates or replaces a node, a pod or a claim (keyed by ``namespace/name``)."""
        with self._lock:
            key = _key(obj)
            kind = "MODIFIED" if key in self._objects[resource] else "ADDED"
            return self._store(resource, key, copy.deepcopy(obj), kind)

    def delete(self, resource: str, key: str) -> None:
        """Deletes ``namespace/name`` (a pod, a claim) or ``name`` (a node)."""
        with self._lock:
            obj = self._objects[resource].pop(key)
            self._revision += 1
            obj["metadata"]["resourceVersion"] = str(self._revision)
            self._record(resource, WatchEvent("DELETED", obj))

    def list(self, resource: str) -> Listed:
        with self._lock:
            items = [copy.deepcopy(o) for o in self._objects[resource].values()]
            return Listed(items, str(self._revision))

    def watch(self, resource: str, resource_version: str, timeout_s: float) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` as they happen, until ``timeout_s`` has passed."""
        since, deadline = int(resource_version), time.monotonic() + timeout_s
        while True:
            with self._lock:
                events = self._events[resource]
                if events and since < events[0][0] - 1:
                    raise ApiError(GONE, f"too old resource version: {since}")
                found = [(v, copy.deepcopy(e)) for v, e in events if v > since]
                left = deadline - time.monotonic()
                if not found and left > 0:
                    self._changed.wait(min(left, 0.5))
            for v, event in found:
                since = v
                yield event
            if time.monotonic() >= deadline:
                return

    def get_pod(self, namespace: str, name: str) -> Json:
        with self._lock:
            return copy.deepcopy(self._pod(namespace, name))

    def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: dict[str, Any]
    ) -> Json:
        with self._lock:
            pod = copy.deepcopy(self._pod(namespace, name, uid))
            notes = pod["metadata"].setdefault("annotations", {})
            for key, value in annotations.items():
                if value is None:
                    notes.pop(key, None)
                else:
                    notes[key] = value
            self.writes += 1
            return copy.deepcopy(self._store("pods", f"{namespace}/{name}", pod, "MODIFIED"))

    def bind_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        annotations: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            pod = copy.deepcopy(self._pod(namespace, name, uid))
            if pod.get("spec", {}).get("nodeName"):
                raise ApiError(CONFLICT, f"pod {namespace}/{name} is already assigned to a node")
            pod.setdefault("spec", {})["nodeName"] = node
            pod["metadata"].setdefault("annotations", {}).update(annotations or {})
            self.writes += 1
            self._store("pods", f"{namespace}/{name}", pod, "MODIFIED")

    def _pod(self, namespace: str, name: str, uid: str | None = None) -> Json:
        pod = self._objects["pods"].get(f"{namespace}/{name}")
        if pod is None:
            raise ApiError(NOT_FOUND, f'pods "{name}" not found')
        if uid is not None and pod["metadata"].get("uid") != uid:
            raise ApiError(CONFLICT, f"pod {namespace}/{name}: UID precondition failed")
        return pod

    def _store(self, resource: str, key: str, obj: Json, kind: str) -> Json:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        self._objects[resource][key] = obj
        self._record(resource, WatchEvent(kind, copy.deepcopy(obj)))
        return obj

    def _record(self, resource: str, event: WatchEvent) -> None:
        events = self._events[resource]
        events.append((self._revision, event))
        self._changed.notify_all()
        if len(events) > self._keep:
            del events[: len(events) - self._keep]


def _key(obj: Json) -> str:
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])
