"""A Kubernetes pod's request as the placement layer sees it (:class:`~arkgpu.model.resources.Pod`).

HAMi's resources of the one container that asks for GPUs become the pod's GPU
count, its compute share (``nvidia.com/gpucores`` percent -> milli-GPU) and its
GPU memory (``nvidia.com/gpumem`` MiB, or ``gpumem-percentage`` of the GPU it
lands on); the rules for what is not given are in :func:`shares`. Several GPUs with a
part of each are placed as HAMi places them: that many distinct GPUs of one node, each
with the share and memory asked. HAMi's
``nvidia.com/use-gputype`` / ``nouse-gputype`` become the pod's ``gpu_spec``
(the GPU models of the cluster whose name contains one of the wanted names
and none of the refused ones), and the ``arkgpu.io/`` LC annotations become
:class:`~arkgpu.model.resources.LcAttributes`. Every refusal is a
:class:`~arkgpu.k8s.contract.ContractError` with one line naming the pod and
the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from arkgpu.k8s.cluster.objects import PodInfo
from arkgpu.k8s.contract import (
    ANNOTATION_LATENCY_TARGET_MS,
    ANNOTATION_MAX_BATCH,
    ANNOTATION_MODEL,
    ANNOTATION_NOUSE_GPUTYPE,
    ANNOTATION_PEAK_RPS,
    ANNOTATION_QOS,
    ANNOTATION_USE_GPUTYPE,
    PERCENT_FULL,
    QOS_BE,
    QOS_CLASSES,
    QOS_LC,
    ContractError,
    PodAssignment,
)
from arkgpu.k8s.gpu_requests import GpuRequest
from arkgpu.model.resources import MILLI_PER_GPU, LcAttributes, Pod

NO_MODEL = "<no GPU model matches>"
"""A gpu_spec entry no node has: the pod's type filters exclude every model of the cluster."""


def shares(request: GpuRequest, gpu_memory_mib: int, default_cores: int) -> tuple[int, int]:
    """(compute percent, GPU memory MiB) per GPU of ``request`` on a GPU of ``gpu_memory_mib``.

    Neither cores nor memory given: the whole GPU (100 percent, memory 0 = the whole GPU's).
    Memory without cores: ``default_cores`` percent, or the memory's percentage of the GPU
    when that is 0. Cores without memory: the same percentage of the GPU's memory.
    """
    memory = request.memory_mib
    if memory is None and request.memory_percent is not None:
        memory = gpu_memory_mib * request.memory_percent // PERCENT_FULL
    cores = request.cores_percent
    if cores is None and memory is None:
        return PERCENT_FULL, 0
    if cores is None:
        assert memory is not None
        proportional = math.ceil(PERCENT_FULL * memory / max(gpu_memory_mib, 1))
        cores = default_cores or min(max(proportional, 1), PERCENT_FULL)
    if memory is None:
        memory = gpu_memory_mib * cores // PERCENT_FULL
    return cores, memory


def qos_of(info: PodInfo) -> str:
    """The pod's QoS class (``be`` when not annotated); ContractError for another value."""
    qos = info.annotations.get(ANNOTATION_QOS, QOS_BE)
    if qos not in QOS_CLASSES:
        raise ContractError(
            f"pod {info.key}: {ANNOTATION_QOS}: expected one of {', '.join(QOS_CLASSES)}, "
            f"got {qos[:40]!r}"
        )
    return qos


def lc_attributes(info: PodInfo) -> LcAttributes | None:
    """The LC attributes of an ``lc`` pod (None for ``be``); ContractError naming the field."""
    if qos_of(info) != QOS_LC:
        return None
    notes = info.annotations
    model = notes.get(ANNOTATION_MODEL, "").strip()
    if not model:
        raise ContractError(f"pod {info.key}: {ANNOTATION_MODEL}: required for an lc pod")
    return LcAttributes(
        model=model,
        target_ms=_positive(notes, ANNOTATION_LATENCY_TARGET_MS, info.key),
        peak_rps=_positive(notes, ANNOTATION_PEAK_RPS, info.key),
        max_batch=int(_positive(notes, ANNOTATION_MAX_BATCH, info.key, default=32, whole=True)),
    )


def _positive(
    notes: Mapping[str, str], key: str, pod: str, default: float | None = None, whole: bool = False
) -> float:
    text = notes.get(key)
    if text is None:
        if default is None:
            raise ContractError(f"pod {pod}: {key}: required for an lc pod")
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        kind = "a positive integer" if whole else "a positive number"
        raise ContractError(f"pod {pod}: {key}: expected {kind}, got {text[:40]!r}") from None
    if not 0 < value < 1e9 or math.isnan(value):
        raise ContractError(f"pod {pod}: {key}: expected a positive value, got {text[:40]!r}")
    return value


def gpu_spec(info: PodInfo, models: Iterable[str]) -> frozenset[str]:
    """The models of ``models`` the pod's HAMi type filters admit (empty: any model)."""
    wanted = _names(info.annotations.get(ANNOTATION_USE_GPUTYPE))
    refused = _names(info.annotations.get(ANNOTATION_NOUSE_GPUTYPE))
    if not wanted and not refused:
        return frozenset()
    admitted = frozenset(
        m for m in models if (not wanted or _contains(m, wanted)) and not _contains(m, refused)
    )
    return admitted or frozenset({NO_MODEL})


def _no_model(info: PodInfo, models: Iterable[str]) -> str:
    said = "; ".join(
        f"{key} is {info.annotations[key][:80]!r}"
        for key in (ANNOTATION_USE_GPUTYPE, ANNOTATION_NOUSE_GPUTYPE)
        if key in info.annotations
    )
    return (
        f"pod {info.key}: no GPU model of the cluster matches the pod's type annotations "
        f"({said}); the models here: {', '.join(sorted(models)) or 'none'}"
    )


def _contains(model: str, names: list[str]) -> bool:
    """Whether ``model`` contains one of ``names``, ignoring case (as HAMi matches types)."""
    upper = model.upper()
    return any(n.upper() in upper for n in names)


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def model_pod(info: PodInfo, gpu_memory_mib: int, default_cores: int, models: Iterable[str]) -> Pod:
    """The placement layer's pod for ``info`` on GPUs of ``gpu_memory_mib`` MiB."""
    if info.error:
        raise ContractError(info.error)
    lc = lc_attributes(info)
    if info.gpu is None:
        return Pod(info.uid, info.cpu_milli, info.memory_mib, 0, 0, qos=qos_of(info), lc=lc)
    request = info.gpu.request
    cores, memory = shares(request, gpu_memory_mib, default_cores)
    models = tuple(models)
    spec = gpu_spec(info, models)
    if spec == {NO_MODEL}:
        raise ContractError(_no_model(info, models))
    return Pod(
        info.uid,
        info.cpu_milli,
        info.memory_mib,
        request.count,
        cores * MILLI_PER_GPU // PERCENT_FULL,
        gpu_spec=spec,
        qos=qos_of(info),
        gpu_memory_mib=memory,
        lc=lc,
    )


def adopted_pod(info: PodInfo, a: PodAssignment, gpu_memory_mib: int, default_cores: int) -> Pod:
    """The placement layer's pod for ``info`` as its assignment ``a`` already places it (on
    GPUs of ``gpu_memory_mib`` MiB); a pod breaking the contract counts by its shares."""
    memory = a.gpus[0].memory_mib if a.gpus else 0
    try:
        pod = model_pod(info, gpu_memory_mib, default_cores, [])
        return Pod(
            pod.name,
            pod.cpu_milli,
            pod.memory_mib,
            len(a.gpus),
            pod.gpu_milli,
            qos=pod.qos,
            gpu_memory_mib=memory,
            lc=pod.lc,
        )
    except ContractError:
        milli = min(a.gpus[0].share_bp // 10, MILLI_PER_GPU) if a.gpus else 0
        return Pod(
            info.uid, info.cpu_milli, info.memory_mib, len(a.gpus), milli, gpu_memory_mib=memory
        )
