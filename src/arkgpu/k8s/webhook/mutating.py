"""The mutating rule: pods that ask for GPUs go to ArkGPU's scheduler, with defaults filled.

For a pod where any container (init containers too) asks for ``nvidia.com/gpu``:

- ``spec.schedulerName`` becomes ``scheduler_name`` when the pod uses the default
  scheduler (a pod that names another scheduler keeps it: its owner chose);
- ``arkgpu.io/qos`` is added when missing, only when ``defaults.qos`` is set (by
  default a pod without a class keeps HAMi's meaning of ``gpucores``);
- each GPU container without ``nvidia.com/gpucores`` gets ``defaults.gpucores``, and
  one with neither ``nvidia.com/gpumem`` nor ``gpumem-percentage`` gets
  ``defaults.gpumem`` or ``defaults.gpumem_percentage``, when those are set (in
  ``limits``, and in ``requests`` when the container has that map).

HAMi's ``nvidia.com/priority: 1`` (low, its default) is removed from every container's
limits and requests: it maps onto ArkGPU's default class, and no node advertises it
(:mod:`arkgpu.k8s.hami_compat`). Nothing else changes. Every rule adds only what is
missing, so a second call on its own output patches nothing (``reinvocationPolicy:
IfNeeded`` is safe). A pod
whose GPU request is malformed is left for the validating webhook to refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from arkgpu.k8s import contract, gpu_requests
from arkgpu.k8s.webhook.config import AdmissionDefaults
from arkgpu.k8s.webhook.hami import priority_ops
from arkgpu.k8s.webhook.pods import DEFAULT_SCHEDULER, ContainerView, PodView, gpu_containers
from arkgpu.k8s.webhook.reviews import Verdict

Op = Mapping[str, Any]


@dataclass(frozen=True)
class Mutation:
    """What the mutating webhook does."""

    scheduler_name: str = contract.SCHEDULER_NAME
    """The scheduler GPU pods are sent to."""
    defaults: AdmissionDefaults = field(default_factory=AdmissionDefaults)
    """Values filled in when missing."""


def pointer(*parts: str | int) -> str:
    """A JSON Pointer (RFC 6901) to ``parts``: ``~`` and ``/`` escaped in each."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def mutate(pod: PodView, rule: Mutation) -> Verdict:
    """The verdict (always allowed) and the patch for ``pod``."""
    ops, done = priority_ops(pod, pointer)
    containers = gpu_containers(pod)
    if not containers:
        if ops:
            return Verdict(True, "set " + ", ".join(done), "patched", tuple(ops))
        return Verdict(True, "no container asks for nvidia.com/gpu: unchanged", "no_gpu")
    try:
        requests = [c.gpu_request() for c in containers]
    except contract.ContractError as exc:
        return Verdict(True, f"unchanged: {exc} (the validating webhook refuses it)", "malformed")
    if pod.scheduler_name in (None, "", DEFAULT_SCHEDULER):
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": rule.scheduler_name})
        done.append(f"schedulerName {rule.scheduler_name}")
    ops += _qos(pod, rule.defaults.qos, done)
    for container, request in zip(containers, requests, strict=True):
        ops += _resources(container, request, rule.defaults, done)
    if not ops:
        return Verdict(True, "asks for GPUs; already complete: unchanged", "complete")
    return Verdict(True, "set " + ", ".join(done), "patched", tuple(ops))


def _qos(pod: PodView, qos: str | None, done: list[str]) -> list[Op]:
    if qos is None or pod.annotation(contract.ANNOTATION_QOS) is not None:
        return []
    done.append(f"{contract.ANNOTATION_QOS}={qos}")
    if pod.annotations is None:
        value = {contract.ANNOTATION_QOS: qos}
        return [{"op": "add", "path": "/metadata/annotations", "value": value}]
    path = pointer("metadata", "annotations", contract.ANNOTATION_QOS)
    return [{"op": "add", "path": path, "value": qos}]


def _resources(
    container: ContainerView,
    request: gpu_requests.GpuRequest,
    defaults: AdmissionDefaults,
    done: list[str],
) -> list[Op]:
    missing: dict[str, int] = {}
    if request.cores_percent is None and defaults.gpucores is not None:
        missing[contract.RESOURCE_GPUCORES] = defaults.gpucores
    if request.memory_mib is None and request.memory_percent is None:
        if defaults.gpumem is not None:
            missing[contract.RESOURCE_GPUMEM] = defaults.gpumem
        elif defaults.gpumem_percentage is not None:
            missing[contract.RESOURCE_GPUMEM_PERCENTAGE] = defaults.gpumem_percentage
    ops: list[Op] = []
    maps = ["limits"] + (["requests"] if container.requests is not None else [])
    for name, value in missing.items():
        done.append(f"{container.label} {name}={value}")
        for where in maps:
            path = pointer("spec", container.field, container.index, "resources", where, name)
            ops.append({"op": "add", "path": path, "value": str(value)})
    return ops
