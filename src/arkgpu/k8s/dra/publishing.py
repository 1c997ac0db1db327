"""Keeping the node's ResourceSlice equal to its GPUs: reconcile against the API server.

:class:`SliceApi` is what the publisher asks of the API server (get, create, replace,
delete one cluster-scoped ResourceSlice, as plain JSON); unit tests use an in-memory
one, :class:`KubernetesSlices` is the real one over the official ``kubernetes``
client's ``ResourceV1Api``. Bodies are sent as plain dicts and read back raw
(``_preload_content=False``), so no field the client's models might lack is dropped.

A slice carries the SHA-256 of the devices it was written from (annotation
``DEVICES_HASH``): the API server rewrites quantities to their canonical form, so
comparing the returned JSON with ours would see changes that are not there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from arkgpu.k8s.dra.slices import resource_slice, slice_name

DEVICES_HASH = "dra.arkgpu.io/devices-sha256"
"""Annotation on our slice: SHA-256 of the device list it was written from."""


class SliceRefusedError(Exception):
    """The API server refused to delete the slice (one line: its status and reason)."""


class SliceApi(Protocol):
    """The publisher's side of the API server."""

    def get(self, name: str) -> dict[str, Any] | None:
        """The slice named ``name`` as JSON, or None when there is none."""
        ...

    def create(self, body: dict[str, Any]) -> None:
        """Create a slice."""
        ...

    def replace(self, name: str, body: dict[str, Any]) -> None:
        """Replace a slice (``body`` carries the resourceVersion read)."""
        ...

    def delete(self, name: str) -> None:
        """Delete a slice; no error when it is gone, :class:`SliceRefusedError` when refused."""
        ...


def devices_hash(devices: list[dict[str, Any]]) -> str:
    """SHA-256 of the device list's canonical JSON."""
    return hashlib.sha256(json.dumps(devices, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Publisher:
    """Writes one node's slice for one driver."""

    api: SliceApi
    node: str
    driver: str

    @property
    def name(self) -> str:
        """The slice's object name."""
        return slice_name(self.node, self.driver)

    def reconcile(self, devices: list[dict[str, Any]]) -> str:
        """Make the slice list ``devices``: "created", "updated" or "unchanged"."""
        digest = devices_hash(devices)
        current = self.api.get(self.name)
        if current is None:
            self.api.create(self._body(devices, digest, 1))
            return "created"
        meta = current.get("metadata", {})
        if (meta.get("annotations") or {}).get(DEVICES_HASH) == digest:
            return "unchanged"
        generation = int(current.get("spec", {}).get("pool", {}).get("generation", 0)) + 1
        body = self._body(devices, digest, generation)
        body["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        self.api.replace(self.name, body)
        return "updated"

    def withdraw(self) -> None:
        """Delete the slice (the driver stops)."""
        self.api.delete(self.name)

    def _body(self, devices: list[dict[str, Any]], digest: str, generation: int) -> dict[str, Any]:
        body = resource_slice(self.node, self.driver, devices, generation)
        body["metadata"]["annotations"] = {DEVICES_HASH: digest}
        return body


def read_or_none(
    read: Callable[..., Any], missing: type[Exception], *args: str
) -> dict[str, Any] | None:
    """``read(*args)`` of the official client, its answer parsed as JSON (every field kept);
    None when the API server says 404 (``missing``: the client's ApiException)."""
    try:
        response = read(*args, _preload_content=False)
    except missing as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise
    data: dict[str, Any] = json.loads(response.data)
    return data


class KubernetesSlices:
    """:class:`SliceApi` over the official client (``ResourceV1Api``)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client  # noqa: PLC0415 (the k8s extra, loaded when used)

        self._api: Any = client.ResourceV1Api(api_client)  # bodies are plain dicts
        self._exception = client.ApiException

    def get(self, name: str) -> dict[str, Any] | None:
        """The slice as JSON; None on 404."""
        return read_or_none(self._api.read_resource_slice, self._exception, name)

    def create(self, body: dict[str, Any]) -> None:
        """POST the slice."""
        self._api.create_resource_slice(body, _preload_content=False)

    def replace(self, name: str, body: dict[str, Any]) -> None:
        """PUT the slice."""
        self._api.replace_resource_slice(name, body, _preload_content=False)

    def delete(self, name: str) -> None:
        """DELETE the slice; a 404 is fine, any other refusal is :class:`SliceRefusedError`."""
        try:
            self._api.delete_resource_slice(name, _preload_content=False)
        except self._exception as exc:
            if exc.status != 404:
                raise SliceRefusedError(f"{exc.status} {exc.reason}") from exc
