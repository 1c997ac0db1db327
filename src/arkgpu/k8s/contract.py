"""ArkGPU's contract with Kubernetes: resource names, annotation keys, versioned JSON.

One place for every name a pod, a node or a chart spells; the extender, the
webhook, the device plugin, the node inventory and the DRA driver import them
from here. Pods written for HAMi run unchanged: they ask with HAMi's resource
names (``nvidia.com/gpu``, ``nvidia.com/gpumem`` in MiB,
``nvidia.com/gpumem-percentage``, ``nvidia.com/gpucores`` in percent). ArkGPU's
own knowledge of a pod (QoS class, latency target, model) rides on
annotations under ``arkgpu.io/``.

Two annotations carry JSON with a ``version`` field:

- the node inventory (``arkgpu.io/gpu-inventory`` on a Node): the node's GPUs
  as its agent last saw them, see :class:`NodeInventory`;
- the pod assignment (``arkgpu.io/assignment`` on a Pod): where the extender
  placed it, written before the bind, see :class:`PodAssignment`.

Parsing is strict: a wrong type, a missing field, an unknown version or a
value out of range raises :class:`ContractError` with one line naming the
annotation and the field. Nothing here talks to an API server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

GROUP = "arkgpu.io"
"""Prefix of every ArkGPU annotation and label."""

# HAMi-compatible resources (limits of a container).
RESOURCE_GPU = "nvidia.com/gpu"
"""Number of GPUs (whole or shared) a container asks for."""
RESOURCE_GPUMEM = "nvidia.com/gpumem"
"""GPU memory per GPU, MiB."""
RESOURCE_GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"
"""GPU memory per GPU as a percentage of the GPU's memory (when gpumem is not given)."""
RESOURCE_GPUCORES = "nvidia.com/gpucores"
"""Compute share per GPU, percent (100: a whole GPU's time)."""
SHARED_RESOURCES = (RESOURCE_GPUMEM, RESOURCE_GPUMEM_PERCENTAGE, RESOURCE_GPUCORES)
"""Resources no node advertises: kube-scheduler ignores them (``ignoredByScheduler``) and
the extender accounts for them."""
MANAGED_RESOURCES = (RESOURCE_GPU, *SHARED_RESOURCES)
"""Every resource the extender manages (its ``managedResources``)."""

# HAMi's GPU model filters (comma-separated model names), honoured as HAMi does.
ANNOTATION_USE_GPUTYPE = "nvidia.com/use-gputype"
"""Run only on GPUs whose model contains one of these names."""
ANNOTATION_NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"
"""Never run on GPUs whose model contains one of these names."""

# ArkGPU's pod annotations.
ANNOTATION_QOS = f"{GROUP}/qos"
"""``lc`` (latency-critical inference) or ``be`` (best effort; the default)."""
ANNOTATION_LATENCY_TARGET_MS = f"{GROUP}/latency-target-ms"
"""LC: p99 latency target, milliseconds (a positive number)."""
ANNOTATION_MODEL = f"{GROUP}/model"
"""DNN model served or trained, as the predictor's profiles spell it (``resnet50``)."""
ANNOTATION_MAX_BATCH = f"{GROUP}/max-batch"
"""LC: largest batch the service's dynamic batcher forms (a positive integer)."""
ANNOTATION_PEAK_RPS = f"{GROUP}/peak-rps"
"""LC: expected peak request rate, requests per second (a positive number)."""
ANNOTATION_ASSIGNMENT = f"{GROUP}/assignment"
"""Written by the extender: a :class:`PodAssignment` as JSON."""
ANNOTATION_ALLOCATED = f"{GROUP}/allocated"
"""Written by the device plugin once Allocate has created the pod's regions (RFC 3339 time)."""

# Node annotations and labels.
ANNOTATION_INVENTORY = f"{GROUP}/gpu-inventory"
"""Written by the node agent: a :class:`NodeInventory` as JSON."""
LABEL_NODE_ENABLED = f"{GROUP}/gpu"
"""Label ``true`` on nodes that run ArkGPU's device plugin (the DaemonSet's node selector)."""

SCHEDULER_NAME = "arkgpu-scheduler"
"""Default ``schedulerName`` of the kube-scheduler profile that calls the extender."""

QOS_LC = "lc"
QOS_BE = "be"
QOS_CLASSES = (QOS_LC, QOS_BE)

INVENTORY_VERSION = 1
"""Version of the node inventory JSON this code writes and reads."""
ASSIGNMENT_VERSION = 1
"""Version of the pod assignment JSON this code writes and reads."""

PERCENT_FULL = 100
"""``nvidia.com/gpucores`` and ``gpumem-percentage`` of a whole GPU."""


class ContractError(ValueError):
    """A resource, an annotation or its JSON breaks the contract (one line, names the field)."""


@dataclass(frozen=True, slots=True)
class InventoryGpu:
    """One GPU of a node, as the node agent saw it."""

    index: int
    """CUDA/NVML index on the node (0-based)."""
    uuid: str
    """NVML UUID (``GPU-...``)."""
    model: str
    """Product name as NVML gives it (``NVIDIA H200``)."""
    memory_mib: int
    """Total memory, MiB."""
    mig: bool = False
    """MIG mode enabled (such a GPU is not shared by ArkGPU)."""
    healthy: bool = True
    """False after an XID error or a failed NVML query; the extender places nothing on it."""
    minor: int | None = None
    """Minor number of its device node ``/dev/nvidia<minor>`` (NVML's, which need not be the
    index); None: unknown, the index is used. Node-local: not in the annotation."""


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """A node's GPUs (annotation ``arkgpu.io/gpu-inventory``)."""

    gpus: tuple[InventoryGpu, ...]
    """Every GPU of the node, by index."""
    updated: str = ""
    """When the agent last wrote it (RFC 3339, UTC)."""
    corrections: tuple[tuple[str, float], ...] = ()
    """Online calibration's corrections per DNN model on this node, (model, factor) sorted by
    model: the node runtime's measured over predicted latency (key ``corrections``, written
    only when there are some; older readers ignore it)."""

    def to_json(self) -> str:
        """The annotation's value."""
        gpus = [
            {
                "index": g.index,
                "uuid": g.uuid,
                "model": g.model,
                "memory_mib": g.memory_mib,
                "mig": g.mig,
                "healthy": g.healthy,
            }
            for g in self.gpus
        ]
        doc: dict[str, Any] = {"version": INVENTORY_VERSION, "updated": self.updated, "gpus": gpus}
        if self.corrections:
            doc["corrections"] = dict(self.corrections)
        return _dump(doc)

    @classmethod
    def from_json(cls, text: str) -> NodeInventory:
        """Parses the annotation's value (ContractError naming the field)."""
        where = ANNOTATION_INVENTORY
        raw = _load(text, where, INVENTORY_VERSION)
        items = _field(raw, "gpus", list, where)
        gpus = tuple(_inventory_gpu(item, f"{where}: gpus[{n}]") for n, item in enumerate(items))
        if [g.index for g in gpus] != list(range(len(gpus))):
            raise ContractError(f"{where}: gpus: indices must be 0..{len(gpus) - 1} in order")
        corrections = _corrections(_field(raw, "corrections", dict, where, default={}), where)
        return cls(gpus, _field(raw, "updated", str, where, default=""), corrections)


CORRECTION_RANGE = (0.1, 10.0)
"""Factors a node may publish: far outside what online calibration's bounds allow."""


def _corrections(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, float], ...]:
    low, high = CORRECTION_RANGE
    out = []
    for model, factor in raw.items():
        ok = isinstance(factor, int | float) and not isinstance(factor, bool)
        if not model or not ok or not low <= factor <= high:
            raise ContractError(
                f"{where}: corrections: {model!r}: expected a factor from {low:g} to {high:g},"
                f" got {factor!r}"
            )
        out.append((model, float(factor)))
    return tuple(sorted(out))


def _inventory_gpu(raw: object, where: str) -> InventoryGpu:
    if not isinstance(raw, dict):
        raise ContractError(f"{where}: expected an object")
    return InventoryGpu(
        index=_count(raw, "index", where),
        uuid=_text(raw, "uuid", where),
        model=_text(raw, "model", where),
        memory_mib=_count(raw, "memory_mib", where, minimum=1),
        mig=_field(raw, "mig", bool, where, default=False),
        healthy=_field(raw, "healthy", bool, where, default=True),
    )


@dataclass(frozen=True, slots=True)
class AssignedGpu:
    """One GPU a pod was given."""

    index: int
    """GPU index on the node."""
    uuid: str
    """The GPU's UUID (the device plugin checks it against the node)."""
    memory_mib: int
    """Memory cap on this GPU, MiB (0: the whole GPU's memory)."""
    share_bp: int
    """Compute share on this GPU, basis points (10000: the whole GPU)."""


@dataclass(frozen=True, slots=True)
class PodAssignment:
    """Where the extender placed a pod (annotation ``arkgpu.io/assignment``).

    Written on the pod before the Binding, so a pod bound to a node always
    carries it; a pod that carries it but is not bound was interrupted mid-bind
    and is rebound or released by the extender (never counted twice).
    """

    node: str
    """Node name."""
    gpus: tuple[AssignedGpu, ...]
    """GPUs on that node (one per ``nvidia.com/gpu``)."""
    qos: str = QOS_BE
    """``lc`` or ``be``: what the node runtime does with the container."""
    container: str = ""
    """Container of the pod that asked for the GPUs (the first such container when empty)."""

    def to_json(self) -> str:
        """The annotation's value."""
        gpus = [
            {"index": g.index, "uuid": g.uuid, "memory_mib": g.memory_mib, "share_bp": g.share_bp}
            for g in self.gpus
        ]
        return _dump(
            {
                "version": ASSIGNMENT_VERSION,
                "node": self.node,
                "qos": self.qos,
                "container": self.container,
                "gpus": gpus,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PodAssignment:
        """Parses the annotation's value (ContractError naming the field)."""
        where = ANNOTATION_ASSIGNMENT
        raw = _load(text, where, ASSIGNMENT_VERSION)
        qos = _field(raw, "qos", str, where, default=QOS_BE)
        if qos not in QOS_CLASSES:
            raise ContractError(f"{where}: qos: expected one of {', '.join(QOS_CLASSES)}")
        items = _field(raw, "gpus", list, where)
        gpus = tuple(_assigned_gpu(item, f"{where}: gpus[{n}]") for n, item in enumerate(items))
        return cls(
            node=_text(raw, "node", where),
            gpus=gpus,
            qos=qos,
            container=_field(raw, "container", str, where, default=""),
        )


def _assigned_gpu(raw: object, where: str) -> AssignedGpu:
    if not isinstance(raw, dict):
        raise ContractError(f"{where}: expected an object")
    share = _count(raw, "share_bp", where, minimum=1)
    if share > 10_000:
        raise ContractError(f"{where}: share_bp: at most 10000, got {share}")
    return AssignedGpu(
        index=_count(raw, "index", where),
        uuid=_text(raw, "uuid", where),
        memory_mib=_count(raw, "memory_mib", where),
        share_bp=share,
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


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _load(text: str, where: str, version: int) -> dict[str, Any]:
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError) as exc:
        raise ContractError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ContractError(f"{where}: expected a JSON object")
    found = raw.get("version")
    if found != version or isinstance(found, bool):
        raise ContractError(f"{where}: version: expected {version}, got {found!r}")
    return raw


def _field(raw: Mapping[str, Any], key: str, kind: type, where: str, default: Any = ...) -> Any:
    if key not in raw and default is not ...:
        return default
    value = raw.get(key)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ContractError(f"{where}: {key}: expected {kind.__name__}, got {value!r}")
    return value


def _text(raw: Mapping[str, Any], key: str, where: str) -> str:
    value: str = _field(raw, key, str, where)
    if not value or len(value) > 253:
        raise ContractError(f"{where}: {key}: expected 1..253 characters")
    return value


def _count(raw: Mapping[str, Any], key: str, where: str, minimum: int = 0) -> int:
    value: int = _field(raw, key, int, where)
    if not minimum <= value < 2**40:
        raise ContractError(f"{where}: {key}: out of range ({value})")
    return value
