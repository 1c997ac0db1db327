"""A pod's GPU selection by UUID as a policy input: GPUs it refuses are out of its sight.

HAMi's ``nvidia.com/use-gpuuuid`` / ``nouse-gpuuuid`` (:mod:`arkgpu.k8s.selection`)
name single GPUs, below the placement layer's granularity (a pod's ``gpu_spec`` admits
GPU models). While the extender ranks the pod's candidates or assigns it, the GPUs the
pod refuses are hidden from the placement state (no room, no memory, not present), so
every policy chooses among the admitted ones only, and put back afterwards. A node left
with fewer admitted GPUs than the pod asks for fails with a reason naming the annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from arkgpu.k8s import selection
from arkgpu.k8s.cluster.objects import NodeInfo, PodInfo
from arkgpu.model.cluster import ClusterState


@contextmanager
def only_selected(
    state: ClusterState,
    nodes: Mapping[str, NodeInfo],
    rows: Mapping[str, int],
    info: PodInfo,
    names: Iterable[str],
) -> Iterator[dict[str, str]]:
    """Within the block, ``state`` shows on ``names`` only the GPUs the pod admits; yields
    the nodes with too few of them, each with its reason."""
    notes = info.annotations
    if not selection.selects(notes):
        yield {}
        return
    count = max(info.gpu.request.count if info.gpu is not None else 0, 1)
    refused: dict[str, str] = {}
    saved: list[tuple[int, int, bool, int, int]] = []
    for name in names:
        gpus = nodes[name].gpus
        admitted = set(selection.admitted_slots(notes, gpus))
        if len(admitted) < count:
            refused[name] = selection.node_refusal(notes, name, count, len(admitted))
        i = rows[name]
        for s in (s for s in range(len(gpus)) if s not in admitted):
            saved.append(
                (i, s, bool(state.gpu_exists[i, s]), int(state.gpu_left[i, s]),
                 int(state.gpu_memory_left[i, s]))
            )  # fmt: skip
            state.gpu_exists[i, s], state.gpu_left[i, s], state.gpu_memory_left[i, s] = False, 0, 0
    try:
        yield refused
    finally:
        for i, s, exists, left, memory in reversed(saved):
            state.gpu_exists[i, s], state.gpu_left[i, s] = exists, left
            state.gpu_memory_left[i, s] = memory
