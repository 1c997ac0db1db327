"""Time-ordered replay: departures free room, waiting pods get it, bad traces are refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from arkgpu.cli.main import main
from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuPolicy
from arkgpu.placement.ranking import Ranking
from arkgpu.sim.replay import ReplayConfig, occupancy, replay, stretch_durations
from arkgpu.traces.openb import load_nodes, load_pods

EXACT = ReplayConfig(load=None, node_fraction=1.0, samples=10)


def test_waiting_pod_starts_when_the_holder_leaves() -> None:
    """A pod that needs the GPU held by another waits exactly until that one departs."""
    nodes = [Node("n", 8000, 8192, 1, "T4")]
    pods = [
        Pod("first", 1000, 1024, 1, 1000, creation_time=0, deletion_time=100),
        Pod("second", 1000, 1024, 1, 600, creation_time=10, deletion_time=50),
    ]
    for policy in ("arkgpu", "fgd", "bestfit"):
        result = replay(nodes, pods, policy, EXACT)
        assert sorted(result.wait_s.tolist()) == [0.0, 90.0]
        assert result.never_placed == 0


#: One node of 8 cores and 1 GPU; a GPU pod holds 6 cores from 0 to 100, and a CPU-only
#: pod asking for 4 arrives at 30, so it waits for the GPU pod to leave.
ONE_NODE = [Node("n", 8000, 8192, 1, "T4")]
GPU_THEN_CPU = [
    Pod("gpu", 6000, 1024, 1, 1000, creation_time=0, deletion_time=100),
    Pod("cpu", 4000, 1024, 0, 0, creation_time=30, deletion_time=200),
]


def test_waits_are_split_by_pod_kind() -> None:
    """A CPU-only pod that waits for the cores a GPU pod holds is counted as CPU-only; one
    that never fits is counted apart as CPU-only too."""
    huge = Pod("huge", 16000, 1024, 0, 0, creation_time=40, deletion_time=50)
    result = replay(ONE_NODE, [*GPU_THEN_CPU, huge], "arkgpu", EXACT)
    summary = result.summary()
    assert result.wait_is_cpu_only.tolist() == [False, True]
    assert (summary["cpu_only_pods_waited"], summary["cpu_only_wait_s_mean"]) == (1, 70.0)
    assert (summary["gpu_pods_waited"], summary["gpu_wait_s_mean"]) == (0, 0.0)
    assert (result.never_placed, summary["never_placed_cpu_only"]) == (1, 1)


def test_pod_that_never_fits_is_counted_apart() -> None:
    """A pod bigger than any node never leaves the queue and is reported."""
    nodes = [Node("n", 8000, 8192, 1, "T4")]
    pods = [
        Pod("ok", 1000, 1024, 1, 500, creation_time=0, deletion_time=10),
        Pod("huge", 1000, 1024, 2, 1000, creation_time=5, deletion_time=20),
    ]
    result = replay(nodes, pods, "arkgpu", EXACT)
    assert result.never_placed == 1
    assert len(result.wait_s) == 1


def test_replay_of_small_trace_allocates_within_capacity(small_trace: tuple[Path, Path]) -> None:
    """Allocation stays in 0..100%, waits are non-negative, every pod is placed or counted."""
    nodes_path, pods_path = small_trace
    pods = load_pods(pods_path)
    result = replay(
        load_nodes(nodes_path), pods, "arkgpu", ReplayConfig(load=1.5, node_fraction=1.0)
    )
    assert ((result.allocation_pct >= 0) & (result.allocation_pct <= 100)).all()
    assert (result.wait_s >= 0).all()
    assert len(result.wait_s) + result.never_placed == len(pods)
    assert result.waiting.max() > 0, "a peak load of 150% must make pods wait"


def test_stretch_reaches_the_asked_peak_load(small_trace: tuple[Path, Path]) -> None:
    """Durations are stretched until the peak held share (if none waited) is the load asked."""
    _, pods_path = small_trace
    pods = load_pods(pods_path)
    stretched = stretch_durations(pods, 22000, 0.8)
    assert occupancy(stretched, 22000, 1.0) == pytest.approx(0.8, abs=0.05)
    assert [p.creation_time for p in stretched] == [p.creation_time for p in pods]


def test_trace_without_times_is_refused() -> None:
    """Replay needs creation and deletion times; the error names the first pod without."""
    nodes = [Node("n", 8000, 8192, 1, "T4")]
    with pytest.raises(ValueError, match="p0"):
        replay(nodes, [Pod("p0", 1000, 1024, 1, 500)], "arkgpu", EXACT)


def test_cli_tools_print_the_documented_json_keys(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``placement bound``, ``defrag``, ``replay`` and ``cost`` print JSON with their keys."""
    nodes_path, pods_path = small_trace
    common = ["--trace", str(pods_path), "--nodes", str(nodes_path)]
    assert main(["placement", "bound", *common, "--seed", "3", "--json"]) == 0
    bound = json.loads(capsys.readouterr().out)
    assert bound["lp_bound_unallocated_pct"] <= bound["clairvoyant_unallocated_pct"] + 1e-9
    assert bound["lp_unhostable_pods"] == 0
    defrag = [*common, "--policy", "bestfit", "--seed", "5", "--max-moves", "4", "--json"]
    assert main(["placement", "defrag", *defrag, "--planner", "greedy"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["pods_moved"] <= 4
    assert {"gpus_gained", "gpus_gained_per_move", "wall_s"} <= set(plan)
    assert main(["placement", "replay", *common, "--policy", "arkgpu", "--json"]) == 0
    argv = ["placement", "replay", *common, "--policy", "arkgpu,fgd", "--json"]
    docs = json.loads(capsys.readouterr().out)
    assert {"wait_s_mean", "wait_s_p99", "waiting"} <= set(docs)
    assert main([*argv, "--plot", str(tmp_path / "r.png")]) == 0
    assert [d["policy"] for d in json.loads(capsys.readouterr().out)] == ["arkgpu", "fgd"]
    assert (tmp_path / "r.png").stat().st_size > 0
    assert main(["placement", "cost", *common, "--policies", "arkgpu"]) == 0
    assert json.loads(capsys.readouterr().out)["cpu_ms_median"] >= 0


def test_defrag_rejects_negative_moves(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A negative K is a one-line error, exit status 2."""
    nodes_path, pods_path = small_trace
    argv = ["placement", "defrag", "--trace", str(pods_path), "--nodes", str(nodes_path)]
    assert main([*argv, "--policy", "fgd", "--max-moves", "-1"]) == 2
    assert "--max-moves" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--node-fraction", "0"),
        ("--node-fraction", "1.5"),
        ("--refused-retry-s", "0"),
        ("--load", "0"),
    ],
)
def test_replay_rejects_bad_settings_naming_them(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    """A node share outside (0, 1], a retry period or a load that is not positive is a
    one-line error naming the setting, exit status 2, before any pod is replayed."""
    nodes_path, pods_path = small_trace
    argv = ["placement", "replay", "--trace", str(pods_path), "--nodes", str(nodes_path)]
    assert main([*argv, "--policy", "fgd", flag, value]) == 2
    err = capsys.readouterr().err
    assert flag.removeprefix("--").replace("-", "_") in err.replace("-", "_")
    assert len(err.strip().splitlines()) == 1


def test_replay_config_refuses_too_few_samples() -> None:
    """A curve of fewer than two samples is refused, naming the field."""
    with pytest.raises(ValueError, match="samples"):
        ReplayConfig(samples=1)


def test_a_pod_offered_again_is_learned_once() -> None:
    """arkgpu learns from arrivals: a pod that waits and is retried is counted once: the
    replay calls ``observe`` on arrival only and ``rank`` on every offer."""
    nodes = [Node("n", 8000, 8192, 1, "T4")]
    pods = [
        Pod("first", 1000, 1024, 1, 1000, creation_time=0, deletion_time=100),
        Pod("second", 1000, 1024, 1, 600, creation_time=10, deletion_time=50),
    ]
    learned: list[tuple[int, float]] = []
    original = ArkgpuPolicy.rank

    def spy(
        self: ArkgpuPolicy,
        state: ClusterState,
        pod: Pod,
        rng: np.random.Generator,
        candidates: IntArray | None = None,
        waited_s: float = 0.0,
    ) -> Ranking:
        learned.append((sum(self.learner.shapes.values()), waited_s))
        return original(self, state, pod, rng, candidates, waited_s)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ArkgpuPolicy, "rank", spy)
        result = replay(nodes, pods, "arkgpu", EXACT)
    assert result.decisions == 3  # first, second (waits), second again
    assert learned == [(1, 0.0), (2, 0.0), (2, 90.0)]


def test_pod_refused_though_it_fits_is_retried_when_a_placement_changes_the_node() -> None:
    """`arkgpu-reserve` turns a CPU-only pod away while the node's free GPU needs its
    cores; once a GPU pod takes that GPU the reservation is gone, and the waiting pod
    starts then, not at the next departure. `arkgpu` places it at once."""
    nodes = [Node("n", 16000, 65536, 2, "T4")]
    pods = [
        Pod("g0", 8000, 1024, 1, 1000, creation_time=0, deletion_time=1000),
        Pod("cpu", 4000, 1024, 0, 0, creation_time=10, deletion_time=1000),
        Pod("g1", 2000, 1024, 1, 1000, creation_time=20, deletion_time=1000),
    ]
    reserve = replay(nodes, pods, "arkgpu-reserve", EXACT)
    assert sorted(reserve.wait_s.tolist()) == [0.0, 0.0, 10.0]
    assert reserve.wait_is_cpu_only[reserve.wait_s == 10.0].tolist() == [True]
    assert reserve.never_placed == 0
    greedy = replay(nodes, pods, "arkgpu", EXACT)
    assert greedy.wait_s.tolist() == [0.0, 0.0, 0.0]


def test_reserve_lets_a_refused_cpu_only_pod_in_once_it_has_waited_long_enough() -> None:
    """Once the GPU pod leaves (t=100), the CPU-only pod would take cores the idle GPU needs:
    `arkgpu-reserve` refuses it then, and with nothing else happening the replay offers it
    again 300 s later (kube-scheduler's retry of an unschedulable pod); it has waited 370 s,
    past the reserve's 300 s, and starts. `arkgpu` starts it at 100."""
    assert replay(ONE_NODE, GPU_THEN_CPU, "arkgpu", EXACT).wait_s.tolist() == [0.0, 70.0]
    reserve = replay(ONE_NODE, GPU_THEN_CPU, "arkgpu-reserve", EXACT)
    assert (reserve.wait_s.tolist(), reserve.never_placed) == ([0.0, 370.0], 0)
    patient = replace(EXACT, refused_retry_s=5000)
    waits = replay(ONE_NODE, GPU_THEN_CPU, "arkgpu-reserve", patient).wait_s
    assert waits.tolist() == [0.0, 5070.0]
