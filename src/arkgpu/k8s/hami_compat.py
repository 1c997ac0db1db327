"""The compatibility contract with HAMi: every pod field HAMi documents for NVIDIA GPUs, and
what ArkGPU does with it.

One row per resource, annotation or container environment variable (a row per value where
the value changes the answer). Each has one of four behaviours:

- ``same``: as HAMi documents it;
- ``different``: supported, in another way the row says;
- ``refused``: the validating webhook refuses the pod at creation, with the row's reason
  (names the field and what to use instead);
- ``warned``: HAMi treats it as a preference; the pod is admitted with the row's text as an
  AdmissionReview warning (kubectl prints it).

The webhook implements the refusals and warnings from this table
(:mod:`arkgpu.k8s.webhook.hami`), docs/MIGRATING-FROM-HAMI.md carries the table
:func:`markdown_table` writes (a test compares them), and the end-to-end tests create a
pod per row on the real control plane. HAMi's facts are from its documentation, cited per
row (read, not copied): its configuration reference and examples as of commit
``756c025`` (before they moved to https://project-hami.io).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from arkgpu.k8s import contract

HAMI_TREE = "https://github.com/Project-HAMi/HAMi/blob/756c02504eff5eaf9661f3601065d142c7b61f94"
CONFIG_DOC = f"{HAMI_TREE}/docs/config.md"
"""HAMi's configuration reference: resources, pod annotations, container environment."""
EXAMPLES = f"{HAMI_TREE}/examples/nvidia"

RESOURCE_PRIORITY = "nvidia.com/priority"
RESOURCE_MIG_PREFIX = "nvidia.com/mig-"
ANNOTATION_USE_GPUUUID = "nvidia.com/use-gpuuuid"
ANNOTATION_NOUSE_GPUUUID = "nvidia.com/nouse-gpuuuid"
ANNOTATION_NODE_POLICY = "hami.io/node-scheduler-policy"
ANNOTATION_GPU_POLICY = "hami.io/gpu-scheduler-policy"
ANNOTATION_VGPU_MODE = "nvidia.com/vgpu-mode"
ANNOTATION_NUMA_BIND = "nvidia.com/numa-bind"
HAMI_PREFIX = "hami.io/"
ENV_CORE_POLICY = "GPU_CORE_UTILIZATION_POLICY"
ENV_DISABLE_CONTROL = "CUDA_DISABLE_CONTROL"
ENV_HAMI_CORE_LIMITS = ("CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT")

ANY = "any"
"""A row's ``value`` when every value gets the same answer."""


class Behaviour(enum.Enum):
    """What ArkGPU does with a HAMi field."""

    SAME = "same"
    DIFFERENT = "different"
    REFUSED = "refused"
    WARNED = "warned"


class Kind(enum.Enum):
    """Where the field is written in a pod."""

    RESOURCE = "resource"
    """``resources.limits`` of a container."""
    ANNOTATION = "annotation"
    """``metadata.annotations``."""
    ENV = "env"
    """``env`` of a container."""


@dataclass(frozen=True)
class Row:
    """One field (and value) HAMi documents, and ArkGPU's behaviour."""

    field: str
    kind: Kind
    value: str
    """The values this row is about (``any``, ``0``, ``mig``...)."""
    hami: str
    """What HAMi documents, in a few words of ours."""
    behaviour: Behaviour
    arkgpu: str
    """What ArkGPU does; for refused and warned rows, the sentence the user reads."""
    source: str
    """Where HAMi documents it."""


R, A, E = Kind.RESOURCE, Kind.ANNOTATION, Kind.ENV
SAME, DIFF, REFUSED, WARNED = Behaviour

ROWS: tuple[Row, ...] = (
    Row(contract.RESOURCE_GPU, R, ANY, "number of (virtual) GPUs", SAME,
        "the same: that many distinct GPUs of one node", CONFIG_DOC),
    Row(contract.RESOURCE_GPUMEM, R, ANY, "memory per GPU, MiB", SAME,
        "the same: a hard cap in the container (the limiter)", CONFIG_DOC),
    Row(contract.RESOURCE_GPUMEM_PERCENTAGE, R, ANY, "memory per GPU, percent of the GPU", SAME,
        "the same", CONFIG_DOC),
    Row(contract.RESOURCE_GPUCORES, R, ANY, "compute per GPU, percent; a cap on utilisation",
        SAME,
        "for a pod without arkgpu.io/qos: the same, a cap the pod gets whenever it has work; "
        "a pod naming an ArkGPU class opts into the node runtime's adjustments (docs/NODE.md)",
        CONFIG_DOC),
    Row("nvidia.com/gpumem without nvidia.com/gpucores", R, ANY,
        "memory share, compute not limited (defaultCores 0)", SAME,
        "the same: compute not capped; placement counts the memory's fraction of the GPU",
        CONFIG_DOC),
    Row("nvidia.com/gpucores without nvidia.com/gpumem", R, ANY,
        "memory not given: the whole GPU's memory (defaultMem 0)", DIFF,
        "memory capped at the same percent of the GPU as the cores, so other pods fit "
        "beside it; give nvidia.com/gpumem-percentage 100 for HAMi's whole memory",
        CONFIG_DOC),
    Row("nvidia.com/gpu above 1 with a part of each GPU", R, ANY,
        "each GPU gives the memory and cores asked", SAME,
        "the same: distinct GPUs of one node, each with the memory and cores asked (the "
        "limiter caps and paces each GPU)", CONFIG_DOC),
    Row(RESOURCE_PRIORITY, R, "1", "low priority (HAMi's default)", DIFF,
        "mapped onto ArkGPU's default class (best effort): the mutating webhook removes the "
        "resource", f"{EXAMPLES}/example.yaml"),
    Row(RESOURCE_PRIORITY, R, "0", "high priority: takes the GPU first when contended", REFUSED,
        "nvidia.com/priority 0 (high) has no counterpart that needs no more information: "
        "remove it and annotate arkgpu.io/qos: lc with arkgpu.io/model and "
        "arkgpu.io/latency-target-ms (latency-critical pods come first)",
        f"{EXAMPLES}/example.yaml"),
    Row(f"{RESOURCE_MIG_PREFIX}*", R, ANY, "a MIG instance of that profile", REFUSED,
        "MIG instances are not handed out by ArkGPU (it does not share GPUs in MIG mode): "
        "ask for a share with nvidia.com/gpu 1 and nvidia.com/gpumem / gpucores, or keep "
        "MIG pods on HAMi's nodes", f"{EXAMPLES}/mig_example.yaml"),
    Row(contract.ANNOTATION_USE_GPUTYPE, A, ANY, "only GPU models containing these names",
        SAME, "the same (scheduler extender and device plugin)", CONFIG_DOC),
    Row(contract.ANNOTATION_NOUSE_GPUTYPE, A, ANY, "never GPU models containing these names",
        SAME, "the same (scheduler extender and device plugin)", CONFIG_DOC),
    Row(ANNOTATION_USE_GPUUUID, A, ANY, "only the GPUs with these UUIDs", SAME,
        "the same (scheduler extender and device plugin)", CONFIG_DOC),
    Row(ANNOTATION_NOUSE_GPUUUID, A, ANY, "never the GPUs with these UUIDs", SAME,
        "the same (scheduler extender and device plugin)", CONFIG_DOC),
    Row(ANNOTATION_NODE_POLICY, A, ANY, "binpack or spread nodes, a preference", WARNED,
        "annotation hami.io/node-scheduler-policy is not applied: ArkGPU's placement policy "
        "chooses the node (docs/PLACEMENT_POLICY.md); remove the annotation",
        f"{EXAMPLES}/specify_scheduling_policy.yaml"),
    Row(ANNOTATION_GPU_POLICY, A, ANY, "binpack or spread GPUs, a preference", WARNED,
        "annotation hami.io/gpu-scheduler-policy is not applied: ArkGPU's placement policy "
        "chooses the GPU (docs/PLACEMENT_POLICY.md); remove the annotation",
        f"{EXAMPLES}/specify_scheduling_policy.yaml"),
    Row(ANNOTATION_VGPU_MODE, A, "hami-core", "a share enforced by HAMi-core", DIFF,
        "ArkGPU's limiter enforces the share (the only mode)", CONFIG_DOC),
    Row(ANNOTATION_VGPU_MODE, A, "mig", "a MIG instance instead of a HAMi-core share",
        REFUSED,
        "annotation nvidia.com/vgpu-mode mig: ArkGPU does not share GPUs in MIG mode: "
        "remove the annotation (the limiter shares the GPU) or keep the pod on HAMi's nodes",
        f"{EXAMPLES}/dynamic_mig_example.yaml"),
    Row(ANNOTATION_NUMA_BIND, A, "true", "all GPUs of the pod on one NUMA node", REFUSED,
        "annotation nvidia.com/numa-bind true: ArkGPU does not know the GPUs' NUMA nodes: "
        "remove it, or ask for one GPU", CONFIG_DOC),
    Row(f"{HAMI_PREFIX}* (others)", A, ANY, "written by HAMi's scheduler on placed pods",
        WARNED, "annotations written by HAMi have no effect on ArkGPU", CONFIG_DOC),
    Row(ENV_CORE_POLICY, E, "default, force", "gpucores enforced as a cap", SAME,
        "the same: gpucores is a cap", CONFIG_DOC),
    Row(ENV_CORE_POLICY, E, "disable", "gpucores not enforced", REFUSED,
        "environment GPU_CORE_UTILIZATION_POLICY disable: ArkGPU always enforces "
        "nvidia.com/gpucores: remove the variable and nvidia.com/gpucores (memory without "
        "cores runs uncapped)", CONFIG_DOC),
    Row(ENV_DISABLE_CONTROL, E, "true", "no isolation at all (for debugging)", REFUSED,
        "environment CUDA_DISABLE_CONTROL true: ArkGPU's limits cannot be switched off from "
        "the pod: remove the variable, or ask for whole GPUs (no gpumem, gpucores)",
        CONFIG_DOC),
    Row(", ".join(ENV_HAMI_CORE_LIMITS), E, ANY, "HAMi-core's limits, set by its device plugin",
        WARNED, "no effect: ArkGPU's device plugin sets the container's limits from its "
        "resources", "https://github.com/Project-HAMi/HAMi-core#readme"),
)  # fmt: skip
"""The contract, in the order docs/MIGRATING-FROM-HAMI.md shows it."""


def row(field: str, value: str = ANY) -> Row:
    """The row of ``field`` (and ``value``); KeyError when the table has none."""
    for r in ROWS:
        if r.field == field and (r.value == value or value in r.value.split(", ")):
            return r
    raise KeyError(f"{field} = {value}")


def markdown_table(rows: tuple[Row, ...] = ROWS) -> str:
    """The table as docs/MIGRATING-FROM-HAMI.md carries it."""
    lines = [
        "| Field | Where | Value | HAMi | ArkGPU | What ArkGPU does |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        hami = f"[{r.hami}]({r.source})"
        lines.append(
            f"| `{r.field}` | {r.kind.value} | {r.value} | {hami} | {r.behaviour.value} "
            f"| {r.arkgpu} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
