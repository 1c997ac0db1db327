"""Re-packing planners: their plans are valid, stay within K moves, and never lose a pod."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arkgpu.model.cluster import Assignment, PlacementError
from arkgpu.placement.defrag import (
    DefragProblem,
    Plan,
    apply_plan,
    greedy_plan,
    moved_count,
    validate,
)
from arkgpu.placement.defrag_ga import GaConfig, ga_plan
from arkgpu.sim.replay import place_until
from arkgpu.traces.openb import load_nodes, load_pods
from placement_ext.defrag_cases import two_gpu_problem

FAST_GA = GaConfig(population=10, generations=8, time_limit_s=20.0, nodes=8)


def _planners(problem: DefragProblem, k: int) -> list[Plan]:
    return [greedy_plan(problem, k), ga_plan(problem, k, np.random.default_rng(3), FAST_GA)]


def test_one_move_frees_a_whole_gpu() -> None:
    """Both planners find the single move that admits the waiting whole-GPU pod."""
    problem = two_gpu_problem()
    for plan in _planners(problem, 1):
        state = validate(problem, plan)
        assert plan.gain_milli(problem) == 1000
        assert moved_count(plan, problem) == 1
        assert state.allocated_gpu_milli == 1900
        assert (state.gpu_left == 0).sum() == 1  # the freed GPU is wholly taken


def test_zero_moves_allowed_gains_nothing() -> None:
    """With K = 0 nothing moves and the waiting pod stays out (it does not fit as is)."""
    problem = two_gpu_problem()
    for plan in _planners(problem, 0):
        assert moved_count(plan, problem) == 0
        assert plan.gain_milli(problem) == 0


def test_invalid_plan_is_rejected() -> None:
    """A plan that over-commits a GPU raises instead of silently losing or doubling a pod."""
    problem = two_gpu_problem()
    bad = Plan(admits={0: Assignment(0, (0,))})
    with pytest.raises(PlacementError):
        apply_plan(problem, bad)


def _totals(problem: DefragProblem, plan: Plan) -> tuple[int, int, int]:
    state = validate(problem, plan)
    return (
        int((state.cpu_capacity - state.cpu_left).sum()),
        int((state.memory_capacity - state.memory_left).sum()),
        state.allocated_gpu_milli,
    )


@pytest.mark.parametrize("k", [0, 3, 20])
def test_plans_on_a_full_small_cluster_keep_every_pod(
    small_trace: tuple[Path, Path], k: int
) -> None:
    """After any plan, CPU, memory and GPU in use are the running pods' plus the admitted ones'."""
    nodes_path, pods_path = small_trace
    problem = place_until(load_nodes(nodes_path), load_pods(pods_path), "bestfit", seed=5)
    assert problem.waiting, "the small trace inflated to 100% should leave pods waiting"
    base = problem.state
    for plan in _planners(problem, k):
        assert moved_count(plan, problem) <= k
        cpu, mem, gpu = _totals(problem, plan)
        admitted = [problem.waiting[i] for i in plan.admits]
        assert cpu == int((base.cpu_capacity - base.cpu_left).sum()) + sum(
            p.cpu_milli for p in admitted
        )
        assert mem == int((base.memory_capacity - base.memory_left).sum()) + sum(
            p.memory_mib for p in admitted
        )
        assert gpu == base.allocated_gpu_milli + plan.gain_milli(problem)
        assert len(set(plan.admits)) == len(plan.admits)
