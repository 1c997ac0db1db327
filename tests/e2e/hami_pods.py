"""A pod per row of the HAMi compatibility contract, written as HAMi's users write it.

:data:`EXAMPLES` maps each row of :data:`arkgpu.k8s.hami_compat.ROWS` (by field and
value) to what a pod says for it; the unit tests send them to the webhook's handlers and
the end-to-end tests create them on the real control plane. A test checks that every row
has its example.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arkgpu.k8s import hami_compat as hc

Placement = tuple[list[tuple[str | None, int, int]], tuple[int, Any]]
"""Of each GPU assigned, (uuid or None for any, share_bp, memory MiB); and the limits the
container gets, (share_bp, memory caps in MiB, None: no cap)."""

UUID_USED = "GPU-fake-1"
"""The fake node's second GPU: the use-gpuuuid example names it."""
UUID_REFUSED = "GPU-fake-0"
"""The fake node's first GPU: the nouse-gpuuuid example excludes it."""


@dataclass(frozen=True)
class Example:
    """What a pod writes for one row."""

    limits: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def container(self, name: str = "main") -> dict[str, Any]:
        """The container (limits and requests alike, as HAMi's examples write limits)."""
        body: dict[str, Any] = {
            "name": name,
            "image": "registry.invalid/arkgpu-e2e:never-pulled",
            "resources": {"limits": dict(self.limits)},
        }
        if self.env:
            body["env"] = [{"name": k, "value": v} for k, v in self.env.items()]
        return body

    def pod(self, name: str) -> dict[str, Any]:
        """The pod (no schedulerName: the webhook sends it to ArkGPU's scheduler)."""
        return {
            "metadata": {"name": name, "annotations": dict(self.annotations)},
            "spec": {"containers": [self.container()]},
        }


GPU = "nvidia.com/gpu"
MEM = "nvidia.com/gpumem"
PCT = "nvidia.com/gpumem-percentage"
CORES = "nvidia.com/gpucores"

EXAMPLES: dict[tuple[str, str], Example] = {
    (GPU, hc.ANY): Example({GPU: "1"}),
    (MEM, hc.ANY): Example({GPU: "1", MEM: "3000", CORES: "20"}),
    (PCT, hc.ANY): Example({GPU: "1", PCT: "25", CORES: "20"}),
    (CORES, hc.ANY): Example({GPU: "1", CORES: "30"}),
    ("nvidia.com/gpumem without nvidia.com/gpucores", hc.ANY): Example({GPU: "1", MEM: "2048"}),
    ("nvidia.com/gpucores without nvidia.com/gpumem", hc.ANY): Example({GPU: "1", CORES: "40"}),
    ("nvidia.com/gpu above 1 with a part of each GPU", hc.ANY): Example(
        {GPU: "2", CORES: "30", MEM: "1000"}
    ),
    (hc.RESOURCE_PRIORITY, "1"): Example({GPU: "1", CORES: "10", hc.RESOURCE_PRIORITY: "1"}),
    (hc.RESOURCE_PRIORITY, "0"): Example({GPU: "1", CORES: "10", hc.RESOURCE_PRIORITY: "0"}),
    (f"{hc.RESOURCE_MIG_PREFIX}*", hc.ANY): Example({"nvidia.com/mig-3g.20gb": "1"}),
    ("nvidia.com/use-gputype", hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {"nvidia.com/use-gputype": "fake"}
    ),
    ("nvidia.com/nouse-gputype", hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {"nvidia.com/nouse-gputype": "Tesla K80"}
    ),
    (hc.ANNOTATION_USE_GPUUUID, hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {hc.ANNOTATION_USE_GPUUUID: UUID_USED}
    ),
    (hc.ANNOTATION_NOUSE_GPUUUID, hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {hc.ANNOTATION_NOUSE_GPUUUID: UUID_REFUSED}
    ),
    (hc.ANNOTATION_NODE_POLICY, hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {hc.ANNOTATION_NODE_POLICY: "spread"}
    ),
    (hc.ANNOTATION_GPU_POLICY, hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {hc.ANNOTATION_GPU_POLICY: "binpack"}
    ),
    (hc.ANNOTATION_VGPU_MODE, "hami-core"): Example(
        {GPU: "1", CORES: "10"}, {hc.ANNOTATION_VGPU_MODE: "hami-core"}
    ),
    (hc.ANNOTATION_VGPU_MODE, "mig"): Example(
        {GPU: "2", MEM: "8000"}, {hc.ANNOTATION_VGPU_MODE: "mig"}
    ),
    (hc.ANNOTATION_NUMA_BIND, "true"): Example({GPU: "2"}, {hc.ANNOTATION_NUMA_BIND: "true"}),
    (f"{hc.HAMI_PREFIX}* (others)", hc.ANY): Example(
        {GPU: "1", CORES: "10"}, {"hami.io/vgpu-node": "old-node"}
    ),
    (hc.ENV_CORE_POLICY, "default, force"): Example(
        {GPU: "1", CORES: "10"}, env={hc.ENV_CORE_POLICY: "force"}
    ),
    (hc.ENV_CORE_POLICY, "disable"): Example(
        {GPU: "1", CORES: "10"}, env={hc.ENV_CORE_POLICY: "disable"}
    ),
    (hc.ENV_DISABLE_CONTROL, "true"): Example({GPU: "1"}, env={hc.ENV_DISABLE_CONTROL: "true"}),
    (", ".join(hc.ENV_HAMI_CORE_LIMITS), hc.ANY): Example(
        {GPU: "1", CORES: "10"}, env={"CUDA_DEVICE_SM_LIMIT": "50"}
    ),
}


def example(row: hc.Row) -> Example:
    """The example of ``row``."""
    return EXAMPLES[(row.field, row.value)]


def rows(*behaviours: hc.Behaviour) -> list[hc.Row]:
    """The contract's rows with these behaviours."""
    return [r for r in hc.ROWS if r.behaviour in behaviours]


def row_id(row: hc.Row) -> str:
    """A test id for ``row``."""
    return f"{row.field}={row.value}".replace(" ", "_")


def placed_rows(gpu_mib: int) -> dict[tuple[str, str], Placement]:
    """Where each supported row's example goes and the limits it gets, on a node of two fake
    GPUs of ``gpu_mib`` each. A share without a memory request gets that share of the GPU's
    memory (floor); a memory request without cores is placed as its fraction of the GPU, in
    whole percent rounded up."""

    def part(share_bp: int, uuid: str | None = None) -> Placement:
        mib = gpu_mib * share_bp // 10_000
        return [(uuid, share_bp, mib)], (share_bp, (mib,))

    alone = -(-2048 * 100 // gpu_mib) * 100
    return {
        (GPU, hc.ANY): ([(None, 10_000, 0)], (10_000, (None,))),
        (MEM, hc.ANY): ([(None, 2000, 3000)], (2000, (3000,))),
        (PCT, hc.ANY): ([(None, 2000, gpu_mib // 4)], (2000, (gpu_mib // 4,))),
        (CORES, hc.ANY): part(3000),
        # compute not capped, as in HAMi
        ("nvidia.com/gpumem without nvidia.com/gpucores", hc.ANY): (
            [(None, alone, 2048)],
            (10_000, (2048,)),
        ),
        ("nvidia.com/gpucores without nvidia.com/gpumem", hc.ANY): part(4000),
        ("nvidia.com/gpu above 1 with a part of each GPU", hc.ANY): (
            [("GPU-fake-0", 3000, 1000), ("GPU-fake-1", 3000, 1000)],
            (3000, (1000, 1000)),
        ),
        (hc.RESOURCE_PRIORITY, "1"): part(1000),
        ("nvidia.com/use-gputype", hc.ANY): part(1000),
        ("nvidia.com/nouse-gputype", hc.ANY): part(1000),
        (hc.ANNOTATION_USE_GPUUUID, hc.ANY): part(1000, UUID_USED),
        (hc.ANNOTATION_NOUSE_GPUUUID, hc.ANY): part(1000, UUID_USED),
        (hc.ANNOTATION_VGPU_MODE, "hami-core"): part(1000),
        (hc.ENV_CORE_POLICY, "default, force"): part(1000),
    }
