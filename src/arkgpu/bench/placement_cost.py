"""Decision cost of a placement policy: wall clock and CPU time per pod, one FGD-protocol run."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.arkgpu_learning import Learned
from arkgpu.placement.base import Policy
from arkgpu.placement.relearning import BackgroundSolver
from arkgpu.sim.placing import ExperimentConfig, set_up
from arkgpu.traces.openb import load_nodes, load_pods


@dataclass(frozen=True, slots=True)
class RelearnMode:
    """Where ``arkgpu`` re-learns in a cost run (:mod:`arkgpu.placement.relearning`)."""

    lag: int = 0
    """GPU pods between snapshot and use, computed inline (0: the default policy)."""
    background: bool = False
    """Compute on a worker thread instead (then ``lag`` is unused)."""


def _chooser(
    policy: str, context: PolicyContext, relearn: RelearnMode, worker: BackgroundSolver[Learned]
) -> Policy:
    if relearn == RelearnMode():
        return POLICIES.create(policy, context)
    if policy != "arkgpu":
        raise ValueError(f"re-learning modes apply to the arkgpu policy only, not {policy!r}")
    if relearn.background:
        return ArkgpuPolicy(context.state, solver=worker)
    return ArkgpuPolicy(context.state, ArkgpuConfig(relearn_lag=relearn.lag))


def decision_costs(
    nodes_path: Path,
    pods_path: Path,
    policy: str,
    seed: int,
    inflate: float = 1.3,
    relearn: RelearnMode = RelearnMode(),
) -> dict[str, float | int | str | None]:
    """Per-decision cost of ``policy`` over one FGD-protocol run, by wall clock and by CPU time.

    On a shared machine the wall clock of a 1 ms call is inflated whenever the
    process is preempted; the thread's CPU time (``time.thread_time``) is not,
    so both are reported (a background re-learning's CPU time is on its own
    thread and not in ``cpu_ms``). Decisions of pods that arrive after 130% are
    not made. The unallocated share at 100% arrived comes with them, as the
    re-learning mode changes placements.
    """
    nodes, pods = load_nodes(nodes_path), load_pods(pods_path)
    setup = set_up(nodes, pods, ExperimentConfig(inflate=inflate, seed=seed))
    state, arrivals, policy_rng = setup.state, setup.arrivals, setup.policy_rng
    wall, cpu = np.empty(len(arrivals)), np.empty(len(arrivals))
    arrived, at_100 = 0, None
    worker: BackgroundSolver[Learned] = BackgroundSolver()
    try:
        chooser = _chooser(policy, PolicyContext(state, pods), relearn, worker)
        for i, pod in enumerate(arrivals):
            arrived += pod.total_gpu_milli
            if at_100 is None and arrived > state.total_gpu_milli:
                at_100 = 100.0 * (1.0 - state.allocated_gpu_milli / state.total_gpu_milli)
            w0, c0 = time.perf_counter(), time.thread_time()
            where = chooser.choose(state, pod, policy_rng)
            wall[i], cpu[i] = time.perf_counter() - w0, time.thread_time() - c0
            if where is not None:
                state.place(pod, where)
    finally:
        worker.close()
    return {
        "policy": policy,
        "relearn": "background" if relearn.background else f"lag {relearn.lag}",
        "nodes": len(nodes),
        "decisions": len(arrivals),
        "wall_ms_median": float(np.median(wall) * 1e3),
        "wall_ms_p99": float(np.percentile(wall, 99) * 1e3),
        "wall_ms_max": float(wall.max() * 1e3),
        "cpu_ms_median": float(np.median(cpu) * 1e3),
        "cpu_ms_p99": float(np.percentile(cpu, 99) * 1e3),
        "cpu_ms_max": float(cpu.max() * 1e3),
        "unallocated_pct_at_100": at_100,
    }
