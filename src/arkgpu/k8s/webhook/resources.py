"""Validating a container's HAMi resources: each problem named by container and resource.

The checks, in order, for every container (init containers too) whose limits name
any of ``nvidia.com/gpu``, ``gpumem``, ``gpumem-percentage`` or ``gpucores``:

1. every such quantity is a whole number (``"50"``, or ``"3k"`` as the API
   server writes 3000 back; not ``"0.5"``, which it spells ``500m``, nor a binary
   suffix such as ``4Gi``: :func:`arkgpu.k8s.gpu_requests.whole_count`);
2. memory or cores come with ``nvidia.com/gpu`` (how many GPUs they apply to);
3. ``nvidia.com/gpu`` is at most ``max_gpu_count``;
4. ``gpucores`` and ``gpumem-percentage`` are percentages, 1 to 100;
5. ``gpumem`` is at least 1 MiB and at most the largest GPU's memory (when known);
6. the contract's own parser (:func:`arkgpu.k8s.gpu_requests.gpu_request`, what the
   extender reads) accepts the limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from arkgpu.k8s import contract, gpu_requests
from arkgpu.k8s.webhook.pods import ContainerView


@dataclass(frozen=True)
class Problem:
    """One reason to refuse a pod."""

    reason: str
    """Short label for the metrics (``gpucores``, ``unknown_model``...)."""
    message: str
    """For a person: names the container or annotation, the value and the rule."""


def uses_gpu_resources(container: ContainerView) -> bool:
    """Whether the container's limits name any resource ArkGPU manages."""
    return any(name in container.limits for name in contract.MANAGED_RESOURCES)


def container_problems(
    container: ContainerView, max_gpu_count: int, largest_mib: int | None
) -> list[Problem]:
    """What is wrong with one container's GPU resources (empty: nothing)."""
    where = container.label
    values, malformed = {}, []
    for name, value in container.limits.items():
        if name in contract.MANAGED_RESOURCES:
            try:
                values[name] = gpu_requests.whole_count(value, name)
            except contract.ContractError:
                message = f"{where}: {name} must be a whole number, got {value!r}"
                malformed.append(Problem("quantity", message))
    if malformed:
        return malformed
    problems = _range_problems(where, values, max_gpu_count, largest_mib)
    if not problems:
        try:
            container.gpu_request()
        except contract.ContractError as exc:
            problems.append(Problem("gpu_request", str(exc)))
    return problems


def _range_problems(
    where: str, values: dict[str, int], max_gpu_count: int, largest_mib: int | None
) -> list[Problem]:
    count = values.get(contract.RESOURCE_GPU, 0)
    shared = [name for name in contract.SHARED_RESOURCES if name in values]
    problems = []
    if count == 0 and shared:
        problems.append(
            Problem(
                "gpu_missing",
                f"{where}: {shared[0]} is given without {contract.RESOURCE_GPU} "
                f"(how many GPUs it applies to): add {contract.RESOURCE_GPU}: 1",
            )
        )
    if count > max_gpu_count:
        problems.append(
            Problem(
                "gpu_count",
                f"{where}: {contract.RESOURCE_GPU} is {count}, over the {max_gpu_count} GPUs "
                "one container may ask for in this cluster",
            )
        )
    for name in (contract.RESOURCE_GPUCORES, contract.RESOURCE_GPUMEM_PERCENTAGE):
        problems += _percent(where, name, values.get(name))
    problems += _memory(where, values.get(contract.RESOURCE_GPUMEM), largest_mib)
    return problems


def _percent(where: str, name: str, value: int | None) -> list[Problem]:
    if value is None or 1 <= value <= contract.PERCENT_FULL:
        return []
    what = "compute time" if name == contract.RESOURCE_GPUCORES else "memory"
    reason = name.removeprefix("nvidia.com/").replace("-", "_")
    return [
        Problem(
            reason,
            f"{where}: {name} is {value}, but it is a percentage of one GPU's {what}: "
            f"give 1 to {contract.PERCENT_FULL} (for more than one GPU, raise "
            f"{contract.RESOURCE_GPU})",
        )
    ]


def _memory(where: str, value: int | None, largest_mib: int | None) -> list[Problem]:
    name = contract.RESOURCE_GPUMEM
    if value is None:
        return []
    if value < 1:
        return [Problem("gpumem", f"{where}: {name} is 0: give at least 1 (MiB per GPU)")]
    if largest_mib is not None and value > largest_mib:
        return [
            Problem(
                "gpumem",
                f"{where}: {name} is {value} MiB per GPU, more than the largest GPU in "
                f"this cluster has ({largest_mib} MiB)",
            )
        ]
    return []
