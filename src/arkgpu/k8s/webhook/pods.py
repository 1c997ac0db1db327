"""The parts of a Pod (as JSON in an AdmissionReview) that admission reads.

A pod whose JSON has a wrong type where the API server always sends a given
one (annotations not a map of strings, containers not a list...) was not sent
by an API server: :func:`pod_view` refuses it with a 400 naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from arkgpu.k8s import contract, gpu_requests
from arkgpu.k8s.jsonhttp import RequestError

CONTAINER_LISTS = ("initContainers", "containers")
"""Pod spec lists whose containers may ask for GPUs (ephemeral containers have no resources)."""
DEFAULT_SCHEDULER = "default-scheduler"
"""The ``schedulerName`` the API server fills in when a pod gives none."""


@dataclass(frozen=True)
class ContainerView:
    """One container's name, place and resources."""

    name: str
    field: str
    """``initContainers`` or ``containers``."""
    index: int
    """Position in that list (JSON Patch paths use it)."""
    limits: Mapping[str, str]
    """``resources.limits`` (empty when absent)."""
    requests: Mapping[str, str] | None
    """``resources.requests``; None when absent."""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """``env`` entries with a literal ``value`` (those from ``valueFrom`` are not known here)."""

    @property
    def label(self) -> str:
        """How messages name it: ``container 'main'`` or ``init container 'setup'``."""
        kind = "init container" if self.field == "initContainers" else "container"
        return f"{kind} {self.name!r}"

    def gpu_request(self) -> gpu_requests.GpuRequest:
        """Its HAMi request (ContractError naming the container and the resource)."""
        return gpu_requests.gpu_request(self.limits, self.label)


@dataclass(frozen=True)
class PodView:
    """A pod as admission sees it."""

    annotations: Mapping[str, str] | None
    """``metadata.annotations``; None when the pod has none (a patch must create the map)."""
    scheduler_name: str | None
    """``spec.schedulerName``; None when absent."""
    containers: tuple[ContainerView, ...]
    """Init containers first, then containers."""

    def annotation(self, key: str) -> str | None:
        """An annotation's value, None when absent."""
        return None if self.annotations is None else self.annotations.get(key)


def _bad(where: str, what: str) -> RequestError:
    return RequestError(HTTPStatus.BAD_REQUEST, f"{where}: {what}")


def _map(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"{where}.{key}", "expected an object")
    return value


def _strings(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, str] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _bad(f"{where}.{key}", "expected a map of strings")
    return value


def pod_view(obj: Mapping[str, Any], where: str = "request.object") -> PodView:
    """The view of a Pod's JSON; RequestError 400 naming a field of the wrong type."""
    metadata = _map(obj, "metadata", where)
    spec = _map(obj, "spec", where)
    scheduler = spec.get("schedulerName")
    if scheduler is not None and not isinstance(scheduler, str):
        raise _bad(f"{where}.spec.schedulerName", "expected a string")
    containers = [
        _container(item, name, n, f"{where}.spec.{name}[{n}]")
        for name in CONTAINER_LISTS
        for n, item in enumerate(_list(spec, name, f"{where}.spec"))
    ]
    return PodView(
        annotations=_strings(metadata, "annotations", f"{where}.metadata"),
        scheduler_name=scheduler,
        containers=tuple(containers),
    )


def _list(spec: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(f"{where}.{key}", "expected a list")
    return value


def _container(raw: object, field: str, index: int, where: str) -> ContainerView:
    if not isinstance(raw, dict):
        raise _bad(where, "expected an object")
    name = raw.get("name")
    if not isinstance(name, str):
        raise _bad(f"{where}.name", "expected a string")
    resources = _map(raw, "resources", where)
    return ContainerView(
        name=name,
        field=field,
        index=index,
        limits=_strings(resources, "limits", f"{where}.resources") or {},
        requests=_strings(resources, "requests", f"{where}.resources"),
        env=_env(raw.get("env"), f"{where}.env"),
    )


def _env(raw: object, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise _bad(where, "expected a list")
    out = {}
    for n, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _bad(f"{where}[{n}]", "expected an object with a name")
        value = item.get("value")
        if isinstance(value, str):
            out[item["name"]] = value
    return out


def asks_for_gpu(container: ContainerView) -> bool:
    """Whether the container's limits name ``nvidia.com/gpu`` with anything but zero.

    A malformed quantity counts as asking (validation says what is wrong with it).
    """
    value = container.limits.get(contract.RESOURCE_GPU)
    return value is not None and value.strip() not in ("0", "")


def gpu_containers(pod: PodView) -> tuple[ContainerView, ...]:
    """The containers (init ones too) that ask for GPUs."""
    return tuple(c for c in pod.containers if asks_for_gpu(c))
