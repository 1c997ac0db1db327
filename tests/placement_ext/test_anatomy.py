"""Taking the unallocated share apart: free GPUs, share-mix waste and packing excess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.bench.placement_anatomy import AnatomySpec, run_anatomy, summarise, take_apart
from arkgpu.cli.main import main
from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.defrag import DefragProblem


def _hand_made() -> DefragProblem:
    """Four GPUs: 810+160 on GPU 0, a 470 on each of GPUs 1 and 2, GPU 3 free; a 2-GPU pod waits."""
    state = ClusterState.from_nodes([Node("n", 64000, 262144, 4, "T4")])
    running = (
        (Pod("a", 1000, 1024, 1, 810), Assignment(0, (0,))),
        (Pod("b", 1000, 1024, 1, 160), Assignment(0, (0,))),
        (Pod("c", 1000, 1024, 1, 470), Assignment(0, (1,))),
        (Pod("d", 1000, 1024, 1, 470), Assignment(0, (2,))),
    )
    for pod, where in running:
        state.place(pod, where)
    return DefragProblem(state, running, (Pod("w", 1000, 1024, 2, 1000),))


def test_parts_of_a_hand_made_state() -> None:
    """1910 of 4000 milli used: one free GPU, 90 milli of mix waste, one GPU of excess.

    The shares fit in two GPUs at best (810+160, 470+470), the state uses three.
    """
    parts = take_apart(_hand_made(), lp_pct=0.0, lp_left_out={})
    assert parts.unallocated_pct == pytest.approx(52.25)
    assert parts.free_gpu_pct == pytest.approx(25.0)
    assert parts.share_gpus == 3
    assert parts.share_gpus_fractional_min == pytest.approx(2.0)
    assert parts.mix_waste_pct == pytest.approx(2.25)
    assert parts.packing_excess_pct == pytest.approx(25.0)
    assert parts.failed == {1000: 2}


def test_parts_add_up_and_bound_the_runs(small_trace: tuple[Path, Path]) -> None:
    """On real runs (two workers) the parts sum to the unallocated share, none negative."""
    nodes_path, pods_path = small_trace
    spec = AnatomySpec(nodes_path, pods_path, ("arkgpu", "bestfit"), (1, 2), jobs=2)
    runs = run_anatomy(spec)
    assert [(r.policy, r.seed) for r in runs] == [
        ("arkgpu", 1),
        ("arkgpu", 2),
        ("bestfit", 1),
        ("bestfit", 2),
    ]
    for r in runs:
        total = r.free_gpu_pct + r.mix_waste_pct + r.packing_excess_pct
        assert total == pytest.approx(r.unallocated_pct, abs=1e-9)
        assert min(r.free_gpu_pct, r.mix_waste_pct) >= -1e-9
        assert r.packing_excess_pct >= -1e-9
        assert r.lp_bound_pct <= r.unallocated_pct + 1e-9
    mean = summarise(runs)["arkgpu"]
    both = (runs[0].unallocated_pct + runs[1].unallocated_pct) / 2
    assert mean["unallocated_pct"] == pytest.approx(both)
    assert mean["seeds"] == [1, 2]


def test_cli_prints_runs_and_means_as_json(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``placement anatomy --json``: every run, the means, marked as simulated."""
    nodes_path, pods_path = small_trace
    argv = ["placement", "anatomy", "--trace", str(pods_path), "--nodes", str(nodes_path)]
    assert main([*argv, "--policies", "arkgpu,fgd", "--seeds", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated"] is True
    assert [r["policy"] for r in doc["runs"]] == ["arkgpu", "fgd"]
    assert set(doc["mean"]) == {"arkgpu", "fgd"}
    assert {"packing_excess_pct", "mix_waste_pct", "lp_left_out"} <= set(doc["runs"][0])
    assert main([*argv, "--policies", "arkgpu", "--seeds", "3"]) == 0
    assert "packing-excess" in capsys.readouterr().out
    assert main([*argv, "--policies", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert main([*argv, "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err
