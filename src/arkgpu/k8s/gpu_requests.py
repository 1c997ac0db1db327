"""A container's GPU request: HAMi's resources in its limits, read as whole numbers.

Pods ask with HAMi's resource names (:mod:`arkgpu.k8s.contract`):
``nvidia.com/gpu``, ``nvidia.com/gpumem`` (MiB), ``nvidia.com/gpumem-percentage``
and ``nvidia.com/gpucores`` (percent). Their values are Kubernetes resource
quantities (:func:`quantity`), which must count whole numbers here
(:func:`whole_count`). A bad value raises
:class:`~arkgpu.k8s.contract.ContractError` with one line naming the container
and the resource.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from arkgpu.k8s.contract import (
    PERCENT_FULL,
    RESOURCE_GPU,
    RESOURCE_GPUCORES,
    RESOURCE_GPUMEM,
    RESOURCE_GPUMEM_PERCENTAGE,
    ContractError,
)


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What one container asks for with HAMi's resources (from its limits)."""

    count: int
    """``nvidia.com/gpu``: GPUs (0: none)."""
    memory_mib: int | None = None
    """``nvidia.com/gpumem``: MiB per GPU; None when not given."""
    memory_percent: int | None = None
    """``nvidia.com/gpumem-percentage``: percent of each GPU's memory; None when not given."""
    cores_percent: int | None = None
    """``nvidia.com/gpucores``: percent of each GPU's time; None when not given (a whole GPU
    when neither memory is given either, else shared at the extender's default)."""


def gpu_request(limits: Mapping[str, str], where: str) -> GpuRequest:
    """The request in a container's ``resources.limits`` (quantities as the API gives them).

    ``where`` names the container in errors (``pod ns/name container c``).
    """
    count = _quantity(limits, RESOURCE_GPU, where)
    request = GpuRequest(
        count=0 if count is None else count,
        memory_mib=_quantity(limits, RESOURCE_GPUMEM, where),
        memory_percent=_quantity(limits, RESOURCE_GPUMEM_PERCENTAGE, where),
        cores_percent=_quantity(limits, RESOURCE_GPUCORES, where),
    )
    for name, value in (
        (RESOURCE_GPUMEM_PERCENTAGE, request.memory_percent),
        (RESOURCE_GPUCORES, request.cores_percent),
    ):
        if value is not None and not 0 < value <= PERCENT_FULL:
            raise ContractError(f"{where}: {name}: must be 1..{PERCENT_FULL} percent, got {value}")
    if request.count == 0 and request != GpuRequest(0):
        raise ContractError(f"{where}: {RESOURCE_GPU}: required with GPU memory or cores")
    return request


_QUANTITY = re.compile(
    r"^([+]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$"
)
_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{s: Decimal(1000) ** (n + 1) for n, s in enumerate("kMGTPE")},
    **{f"{s}i": Decimal(1024) ** (n + 1) for n, s in enumerate("KMGTPE")},
}
COUNT_LIMIT = 10**9
"""Largest count a HAMi resource may give (exclusive): a sanity bound, far above any GPU."""


def quantity(text: object, where: str) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``2``, ``1Gi``, ``3k``, ``1e3``) as a number;
    ContractError naming ``where``."""
    value = str(text).strip()
    match = _QUANTITY.match(value) if len(value) <= 40 else None
    if match is None:
        raise ContractError(f"{where}: not a resource quantity: {value[:40]!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]
    except InvalidOperation:
        raise ContractError(f"{where}: not a resource quantity: {value!r}") from None


def whole_count(text: object, where: str) -> int:
    """A HAMi resource (GPUs, MiB or percent) as the whole number it counts.

    The API server stores a quantity in its canonical form, so ``gpumem: 3000``
    comes back as ``3k`` and ``2000m`` as ``2``: both are read. A fraction
    (``1500m``), a binary suffix (``4Gi``: these resources count MiB or percent,
    not bytes) or a count of 10**9 or more is refused.
    """
    value = str(text).strip()
    problem = f"{where}: expected a whole number, got {value[:40]!r}"
    if value.endswith("i"):
        raise ContractError(problem)
    try:
        number = quantity(value, where)
    except ContractError:
        raise ContractError(problem) from None
    if number != number.to_integral_value() or not 0 <= number < COUNT_LIMIT:
        raise ContractError(problem)
    return int(number)


def _quantity(limits: Mapping[str, str], name: str, where: str) -> int | None:
    """A whole-number resource quantity (``"2"``, ``"3k"``), None when absent."""
    text = limits.get(name)
    return None if text is None else whole_count(text, f"{where}: {name}")
