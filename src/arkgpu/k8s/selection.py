"""HAMi's GPU selection annotations: which GPUs of a node a pod may be given.

``nvidia.com/use-gputype`` / ``nouse-gputype`` (model names, comma-separated; a GPU
matches when its model contains one, ignoring case as HAMi does) and ``nvidia.com/use-gpuuuid`` /
``nouse-gpuuuid`` (UUIDs, comma-separated, matched exactly), as HAMi documents them
(:mod:`arkgpu.k8s.hami_compat`). The scheduler extender keeps a pod off GPUs these
refuse and the device plugin, at PreStartContainer, refuses to start a container on
an allocated GPU that breaks them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arkgpu.k8s import contract
from arkgpu.k8s.hami_compat import ANNOTATION_NOUSE_GPUUUID, ANNOTATION_USE_GPUUUID


def names(text: str | None) -> list[str]:
    """The non-empty comma-separated names of an annotation's value."""
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def selects(annotations: Mapping[str, str]) -> bool:
    """Whether the pod names GPUs by UUID at all."""
    return bool(
        names(annotations.get(ANNOTATION_USE_GPUUUID))
        or names(annotations.get(ANNOTATION_NOUSE_GPUUUID))
    )


def uuid_refusal(annotations: Mapping[str, str], uuid: str) -> str | None:
    """Why the pod's UUID annotations refuse the GPU ``uuid`` (None: they admit it)."""
    use = names(annotations.get(ANNOTATION_USE_GPUUUID))
    if use and uuid not in use:
        return f"GPU {uuid} is not named in annotation {ANNOTATION_USE_GPUUUID}"
    if uuid in names(annotations.get(ANNOTATION_NOUSE_GPUUUID)):
        return f"GPU {uuid} is excluded by annotation {ANNOTATION_NOUSE_GPUUUID}"
    return None


def refusal(annotations: Mapping[str, str], gpu: contract.InventoryGpu) -> str | None:
    """Why the pod's selection annotations (UUIDs and models) refuse ``gpu`` (None: they
    admit it)."""
    by_uuid = uuid_refusal(annotations, gpu.uuid)
    if by_uuid is not None:
        return by_uuid
    wanted = names(annotations.get(contract.ANNOTATION_USE_GPUTYPE))
    model = gpu.model.upper()  # HAMi matches model names ignoring case
    if wanted and not any(w.upper() in model for w in wanted):
        return f"GPU model {gpu.model} is not in annotation {contract.ANNOTATION_USE_GPUTYPE}"
    refused = names(annotations.get(contract.ANNOTATION_NOUSE_GPUTYPE))
    if any(r.upper() in model for r in refused):
        key = contract.ANNOTATION_NOUSE_GPUTYPE
        return f"GPU model {gpu.model} is excluded by annotation {key}"
    return None


def admitted_slots(
    annotations: Mapping[str, str], gpus: Sequence[contract.InventoryGpu]
) -> tuple[int, ...]:
    """Positions in ``gpus`` the pod's UUID annotations admit."""
    return tuple(n for n, g in enumerate(gpus) if uuid_refusal(annotations, g.uuid) is None)


def node_refusal(annotations: Mapping[str, str], node: str, count: int, admitted: int) -> str:
    """The reason a node with ``admitted`` GPUs the annotations allow fails a pod of ``count``."""
    use = annotations.get(ANNOTATION_USE_GPUUUID)
    nouse = annotations.get(ANNOTATION_NOUSE_GPUUUID)
    said = "; ".join(
        f"{key} is {value[:120]!r}"
        for key, value in ((ANNOTATION_USE_GPUUUID, use), (ANNOTATION_NOUSE_GPUUUID, nouse))
        if value
    )
    return (
        f"node {node} has {admitted} GPUs the pod's selection admits, it asks for {count} "
        f"({said}): name GPUs of this node in {ANNOTATION_USE_GPUUUID} or remove the annotation"
    )
