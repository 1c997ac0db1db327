"""Builders of small cluster states and pods for placement tests."""

from __future__ import annotations

from pathlib import Path

from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod


def make_state(*nodes: tuple[int, int, int, str]) -> ClusterState:
    """A cluster of (cpu_milli, memory_mib, gpus, model) nodes named n0, n1..."""
    return ClusterState.from_nodes(
        [Node(f"n{i}", cpu, mem, gpus, model) for i, (cpu, mem, gpus, model) in enumerate(nodes)]
    )


def pod(
    cpu: int = 1000,
    gpus: int = 1,
    milli: int = 1000,
    mem: int = 1024,
    spec: frozenset[str] = frozenset(),
) -> Pod:
    """A pod with the given request."""
    return Pod("p", cpu, mem, gpus, milli, spec)


NODE_CSV = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,2,P100
n1,96000,393216,8,G2
n2,32000,131072,4,T4
n3,96000,786432,8,V100M32
n4,16000,65536,1,A10
"""


def write_small_trace(directory: Path, count: int = 24) -> tuple[Path, Path]:
    """A node CSV (5 nodes, 23 GPUs) and a pod CSV mixing shares, whole GPUs and CPU pods."""
    nodes = directory / "nodes.csv"
    nodes.write_text(NODE_CSV)
    lines = [
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    ]
    shapes = [
        (4000, 8192, 1, 500, ""),
        (8000, 16384, 1, 1000, ""),
        (2000, 4096, 1, 250, ""),
        (1000, 2048, 0, 0, ""),
        (16000, 65536, 2, 1000, ""),
        (6000, 12288, 1, 300, "T4|P100"),
    ]
    for i in range(count):
        cpu, mem, num, milli, spec = shapes[i % len(shapes)]
        lines.append(
            f"p{i:03d},{cpu},{mem},{num},{milli},{spec},LS,Running,{i * 10},{i * 10 + 500},{i * 10}"
        )
    pods = directory / "pods.csv"
    pods.write_text("\n".join(lines) + "\n")
    return nodes, pods
