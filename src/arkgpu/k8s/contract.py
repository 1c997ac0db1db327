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

A container's request in HAMi's resources is read by :mod:`arkgpu.k8s.gpu_requests`.

Parsing is strict: a wrong type, a missing field, an unknown version or a
value out of range raises :class:`ContractError` with one line naming the
annotation and the field. Nothing here talks to an API server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
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
