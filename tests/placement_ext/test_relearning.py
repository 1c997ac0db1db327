"""When re-learned measures take effect: inline, after a lag, or from a worker thread."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from arkgpu.bench.placement_cost import RelearnMode, decision_costs
from arkgpu.cli.main import main
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.relearning import BackgroundSolver, LaggedSolver
from arkgpu.sim.placing import ExperimentConfig, run_placement
from arkgpu.traces.openb import load_nodes, load_pods

NODES = [Node("a", 64000, 1 << 18, 4, "G2"), Node("b", 64000, 1 << 18, 4, "G2")]


def test_lagged_solver_releases_each_result_once_after_the_lag() -> None:
    """Submitted at 10 with lag 5: nothing at 14, the result at 15, nothing after."""
    solver: LaggedSolver[str] = LaggedSolver(lag=5)
    solver.submit(lambda: "learned", 10)
    assert solver.ready(14) is None
    assert solver.ready(15) == "learned"
    assert solver.ready(16) is None


def test_lagged_solver_hands_out_the_newest_due_result() -> None:
    """Two results due at once: the newer one wins and the older is dropped."""
    solver: LaggedSolver[str] = LaggedSolver(lag=2)
    solver.submit(lambda: "old", 1)
    solver.submit(lambda: "new", 2)
    assert solver.ready(10) == "new"
    assert solver.ready(11) is None
    with pytest.raises(ValueError, match="lag"):
        LaggedSolver(lag=-1)


def _feed(policy: ArkgpuPolicy, state: ClusterState, count: int) -> None:
    rng = np.random.default_rng(0)
    for i in range(count):
        pod = Pod(f"p{i}", 1000, 1024, 1, 470 if i % 2 else 530)
        where = policy.choose(state, pod, rng)
        assert where is not None
        state.place(pod, where)


def test_policy_uses_what_it_learned_only_after_the_lag() -> None:
    """Warm-up ends at 4 GPU pods; with a lag of 3 the first prices apply from the 7th,
    and the shapes learned at the first arrival from the 4th."""
    state = ClusterState.from_nodes(NODES)
    policy = ArkgpuPolicy(state, ArkgpuConfig(warmup=4, relearn_every=1000, relearn_lag=3))
    _feed(policy, state, 3)
    assert len(policy.tracker.typical.freq) == 0
    _feed(policy, state, 3)
    assert len(policy.tracker.typical.freq) > 0
    assert policy.values.price == {}
    _feed(policy, state, 1)
    assert policy.values.price[(530, frozenset())] > 0


def test_a_lagged_tracker_catches_up_with_the_nodes_changed_since_its_snapshot() -> None:
    """Tables learned from an old snapshot are refreshed to the state at install time."""
    state = ClusterState.from_nodes(NODES)
    lagged = ArkgpuPolicy(state, ArkgpuConfig(warmup=2, relearn_every=4, relearn_lag=5))
    _feed(lagged, state, 10)
    lagged.tracker.refresh(state)
    fresh = ArkgpuPolicy(state, ArkgpuConfig(warmup=2, relearn_every=4))
    fresh.tracker.reset(state, lagged.tracker.typical)
    assert (lagged.tracker.tables.small_sum == fresh.tracker.tables.small_sum).all()
    assert (lagged.tracker.tables.big_count == fresh.tracker.tables.big_count).all()
    assert (lagged.tracker.tables.total == state.gpu_left.sum(axis=1)).all()


def test_background_solver_keeps_only_the_newest_waiting_task() -> None:
    """While one task runs, of two later tasks only the newest runs next."""
    gate, ran = threading.Event(), []

    def task(name: str) -> str:
        assert gate.wait(timeout=60)
        ran.append(name)
        return name

    solver: BackgroundSolver[str] = BackgroundSolver()
    try:
        solver.submit(lambda: task("first"), 1)
        solver.submit(lambda: task("second"), 2)
        solver.submit(lambda: task("third"), 3)
        assert solver.ready(3) is None  # the first task waits on the gate
        gate.set()
        solver.wait()
        assert solver.ready(4) == "third"
        assert ran == ["first", "third"]
        assert solver.ready(5) is None
    finally:
        gate.set()
        solver.close()


def test_background_solver_raises_the_task_error_on_the_caller() -> None:
    """A failed re-learning is not swallowed: the caller that picks it up gets the error."""

    def fail() -> str:
        raise RuntimeError("cutting-stock LP: HiGHS failed")

    solver: BackgroundSolver[str] = BackgroundSolver()
    try:
        solver.submit(fail, 1)
        with pytest.raises(RuntimeError, match="HiGHS"):
            solver.wait()
    finally:
        solver.close()


def test_cost_runs_report_the_100_percent_figure_of_their_placements(
    small_trace: tuple[Path, Path],
) -> None:
    """Inline: the same figure as the experiment; a lag is deterministic; a worker
    thread's run places every pod validly (``state.place`` raises otherwise)."""
    nodes_path, pods_path = small_trace
    nodes, pods = load_nodes(nodes_path), load_pods(pods_path)
    inline = decision_costs(nodes_path, pods_path, "arkgpu", 3)
    expected = run_placement(nodes, pods, "arkgpu", ExperimentConfig(seed=3)).at(100)
    assert inline["unallocated_pct_at_100"] == pytest.approx(expected, abs=1e-9)
    lag = RelearnMode(lag=4)
    first, again = (decision_costs(nodes_path, pods_path, "arkgpu", 3, relearn=lag) for _ in "ab")
    assert first["unallocated_pct_at_100"] == again["unallocated_pct_at_100"]
    assert first["relearn"] == "lag 4"
    background = decision_costs(
        nodes_path, pods_path, "arkgpu", 3, relearn=RelearnMode(background=True)
    )
    assert background["relearn"] == "background"
    assert isinstance(background["unallocated_pct_at_100"], float)
    with pytest.raises(ValueError, match="arkgpu"):
        decision_costs(nodes_path, pods_path, "fgd", 3, relearn=RelearnMode(lag=1))


def test_cost_cli_takes_a_relearning_mode(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``placement cost --background-relearn`` / ``--relearn-lag N``; a negative lag is refused."""
    nodes_path, pods_path = small_trace
    argv = ["placement", "cost", "--trace", str(pods_path), "--nodes", str(nodes_path)]
    assert main([*argv, "--policies", "arkgpu", "--background-relearn"]) == 0
    assert json.loads(capsys.readouterr().out)["relearn"] == "background"
    assert main([*argv, "--policies", "arkgpu", "--relearn-lag", "16"]) == 0
    assert json.loads(capsys.readouterr().out)["relearn"] == "lag 16"
    assert main([*argv, "--relearn-lag", "-1"]) == 2
    assert "--relearn-lag" in capsys.readouterr().err
