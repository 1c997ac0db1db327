"""Builders of small cluster states and pods for placement tests."""

from __future__ import annotations

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
