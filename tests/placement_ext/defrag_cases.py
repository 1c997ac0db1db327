"""Hand-made re-packing problems for the planner tests."""

from __future__ import annotations

from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.defrag import DefragProblem


def two_gpu_problem() -> DefragProblem:
    """One node, two GPUs: a 500 share on GPU 0, a 400 share on GPU 1; a whole-GPU pod waits.

    Moving the 400 beside the 500 frees GPU 1 for the waiting pod: one move, 1000 milli gained.
    """
    state = ClusterState.from_nodes([Node("n0", 32000, 65536, 2, "T4")])
    a, b = Pod("a", 2000, 1024, 1, 500), Pod("b", 2000, 1024, 1, 400)
    running = ((a, Assignment(0, (0,))), (b, Assignment(0, (1,))))
    for pod, where in running:
        state.place(pod, where)
    return DefragProblem(state, running, (Pod("w", 2000, 1024, 1, 1000),))
