"""What an allocated ResourceClaim gives this driver: shares of GPUs and their QoS. Pure.

kube-scheduler writes ``status.allocation.devices.results`` (one result per request:
driver, pool, device, ``shareID`` and ``consumedCapacity``) and copies the claim's
and its DeviceClass's configuration into ``status.allocation.devices.config``. The
QoS comes from an opaque configuration of this driver whose ``parameters`` are::

    apiVersion: dra.arkgpu.io/v1alpha1
    kind: GpuShareConfig
    qos: lc | be                     # default be
    model: resnet50                  # default "unknown"
    latencyTargetMs: 50              # lc: required, > 0
    maxBatch: 8                      # lc: default 8
    peakRps: 100                     # lc: default 0 (unknown)
    batch: 32                        # be: default 32

A configuration's ``requests`` name the requests it applies to (none: all); naming a
main request covers its ``firstAvailable`` subrequests, whose results kube-scheduler
names ``<main>/<subrequest>``. A bad configuration raises :class:`ClaimError` with
one line naming the claim and field.

Prepare groups the shares by main request (:mod:`arkgpu.k8s.dra.grouping`): a main
request's name, a DNS label, names its region folder and CDI device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arkgpu.k8s.dra.slices import CORES, MEMORY
from arkgpu.k8s.gpu_requests import quantity as contract_quantity

CONFIG_API_VERSION = "dra.arkgpu.io/v1alpha1"
"""``apiVersion`` of the driver's opaque configuration."""
CONFIG_KIND = "GpuShareConfig"
"""``kind`` of the driver's opaque configuration."""


class ClaimError(ValueError):
    """A claim this driver cannot prepare (its message is the one line the kubelet shows)."""


@dataclass(frozen=True)
class Qos:
    """The QoS class of a share and what the node runtime needs to know of its workload."""

    kind: str = "be"
    """"lc" or "be"."""
    model: str = "unknown"
    """DNN model served or trained."""
    target_ms: float = 0.0
    """LC: p99 latency target, ms."""
    max_batch: int = 8
    """LC: largest batch."""
    peak_rps: float = 0.0
    """LC: peak request rate, requests/s."""
    batch: int = 32
    """BE: training batch."""


@dataclass(frozen=True)
class Share:
    """One allocated request of a claim: a share of one GPU of this node."""

    request: str
    """The request the result is for: ``<main>`` or ``<main>/<subrequest>``."""
    pool: str
    """Pool (our node's name)."""
    device: str
    """Device name (``gpu-<index>``)."""
    share_id: str
    """kube-scheduler's share ID ("" when the device was allocated whole)."""
    memory_mib: int
    """Memory cap, MiB (the consumed ``memory``)."""
    cores: int
    """Compute share, percent of the GPU (the consumed ``cores``)."""
    qos: Qos
    """QoS from the claim's configuration."""

    @property
    def base_request(self) -> str:
        """The main request (what a container's ``resources.claims[].request`` names)."""
        return base_request(self.request)

    @property
    def gpu_index(self) -> int:
        """The GPU's NVML index, from the device name."""
        return int(self.device.removeprefix("gpu-"))


def base_request(request: str) -> str:
    """``main`` for a subrequest's result ``main/sub``; a main request's name as it is."""
    return request.split("/", 1)[0]


def quantity(text: str) -> float:
    """A Kubernetes Quantity (``6Gi``, ``5000Mi``, ``30``, ``500m``) as a number (ValueError:
    :func:`arkgpu.k8s.gpu_requests.quantity`'s ContractError)."""
    return float(contract_quantity(text, "quantity"))


def shares(claim: dict[str, Any], driver: str) -> list[Share]:
    """The shares of ``claim`` this driver must prepare (ClaimError when not allocated)."""
    where = _where(claim)
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise ClaimError(f"{where}: not allocated")
    devices = allocation.get("devices") or {}
    configs = devices.get("config") or []
    ours = [r for r in devices.get("results") or [] if r.get("driver") == driver]
    return [
        _share(result, qos_of(configs, str(result.get("request", "")), driver, where), where)
        for result in ours
    ]


def _where(claim: dict[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"claim {meta.get('namespace', '?')}/{meta.get('name', '?')}"


def _share(result: dict[str, Any], qos: Qos, where: str) -> Share:
    consumed = result.get("consumedCapacity") or {}
    device = str(result.get("device", ""))
    index = device.removeprefix("gpu-")
    if not device.startswith("gpu-") or not (index.isascii() and index.isdigit()):
        raise ClaimError(f"{where}: device {device!r} is not one of this driver's GPUs")
    if MEMORY not in consumed or CORES not in consumed:
        raise ClaimError(f"{where}: result for {device} has no consumed memory and cores")
    return Share(
        request=str(result.get("request", "")),
        pool=str(result.get("pool", "")),
        device=device,
        share_id=str(result.get("shareID") or ""),
        memory_mib=int(quantity(str(consumed[MEMORY]))) >> 20,
        cores=round(quantity(str(consumed[CORES]))),
        qos=qos,
    )


def config_applies(names: list[str], request: str) -> bool:
    """Whether a config whose ``requests`` are ``names`` applies to a result of ``request``:
    none named (all), the request itself, or its main request (Kubernetes' rule)."""
    return not names or request in names or base_request(request) in names


def qos_of(configs: list[dict[str, Any]], request: str, driver: str, where: str) -> Qos:
    """The QoS of ``request``: the last of this driver's configs that applies to it."""
    chosen: dict[str, Any] | None = None
    for entry in configs:
        opaque = entry.get("opaque") or {}
        names = [str(n) for n in entry.get("requests") or []]
        if opaque.get("driver") == driver and config_applies(names, request):
            chosen = opaque.get("parameters") or {}
    return Qos() if chosen is None else parse_qos(chosen, where)


def parse_qos(params: dict[str, Any], where: str) -> Qos:
    """Parse a ``GpuShareConfig`` (ClaimError naming the field)."""
    if params.get("apiVersion") != CONFIG_API_VERSION or params.get("kind") != CONFIG_KIND:
        raise ClaimError(
            f"{where}: config: expected apiVersion {CONFIG_API_VERSION}, kind {CONFIG_KIND}"
        )
    kind = params.get("qos", "be")
    if kind not in ("lc", "be"):
        raise ClaimError(f"{where}: config field qos: expected lc or be, got {kind!r}")
    model = params.get("model", "unknown")
    if not isinstance(model, str) or not model:
        raise ClaimError(f"{where}: config field model: expected a non-empty string")
    if kind == "be":
        return Qos("be", model, batch=_positive(params, "batch", 32, where))
    target = params.get("latencyTargetMs")
    if isinstance(target, bool) or not isinstance(target, int | float) or not target > 0:
        raise ClaimError(f"{where}: config field latencyTargetMs: lc needs a number > 0")
    return Qos(
        "lc",
        model,
        target_ms=float(target),
        max_batch=_positive(params, "maxBatch", 8, where),
        peak_rps=float(params.get("peakRps", 0.0)),
    )


def _positive(params: dict[str, Any], key: str, default: int, where: str) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClaimError(f"{where}: config field {key}: expected an integer >= 1, got {value!r}")
    return value
