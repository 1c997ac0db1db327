"""The per-trace study: same arrivals as the FGD protocol, bound below every run, report keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.bench.placement_study import (
    StudySpec,
    arrived_until,
    bound_inputs,
    run_study,
    run_task,
)
from arkgpu.cli.placement_tools import bound_document
from arkgpu.placement.bounds import lp_bound
from arkgpu.sim.placing import ExperimentConfig, run_placement, set_up
from arkgpu.traces.catalog import TraceRef
from arkgpu.traces.openb import load_nodes, load_pods


def test_arrivals_are_those_before_the_100_percent_checkpoint(
    small_trace: tuple[Path, Path],
) -> None:
    """The bound's pods are those run_placement saw by 100%: demand <= capacity, bound <= run."""
    nodes_path, pods_path = small_trace
    nodes, pods = load_nodes(nodes_path), load_pods(pods_path)
    capacity = sum(n.num_gpu for n in nodes) * 1000
    for seed in (1, 2, 3):
        arrived = arrived_until(pods, capacity, seed, 1.3)
        assert sum(p.total_gpu_milli for p in arrived) <= capacity
        bound = lp_bound(nodes, arrived).unallocated_pct
        for policy in ("arkgpu", "fgd"):
            run = run_placement(nodes, pods, policy, ExperimentConfig(seed=seed))
            assert bound <= run.at(100) + 1e-9
            placed = 100.0 - run.at(100)
            assert placed * capacity / 100.0 <= sum(p.total_gpu_milli for p in arrived) + 1e-6


def test_study_report_has_bound_gaps_and_target(small_trace: tuple[Path, Path]) -> None:
    """One seed: the policy, the bound, its gap, and the target from the published FGD mean.

    The small trace is labelled as the default workload, whose published FGD mean is 4.77.
    """
    nodes_path, pods_path = small_trace
    spec = StudySpec(
        nodes_path=nodes_path,
        traces=(TraceRef("openb_pod_list_default", pods_path),),
        policies=("arkgpu",),
        seeds=(4,),
    )
    updates: list[int] = []
    report = run_study(spec, lambda r: updates.append(r["tasks_done"]))
    assert updates == [1, 2]
    trace = report["traces"][0]
    lp = trace["lp_bound_unallocated_pct"]
    p = trace["policies"]["arkgpu"]
    assert p["gap_to_lp"] == pytest.approx(p["mean_at_100"] - lp)
    assert p["gap_to_lp"] >= 0
    assert trace["target_at_100"] == pytest.approx((4.77 + lp) / 2)
    assert trace["target_reference"] == "FGD published mean"
    assert trace["arkgpu_meets_target"] == (p["mean_at_100"] <= trace["target_at_100"])
    assert p["cpu_only_failed_at_100"] >= 0
    assert p["cpu_only_cores_failed_at_100"] >= 0.0


def test_bound_command_and_study_see_the_same_clairvoyant_packing(
    small_trace: tuple[Path, Path],
) -> None:
    """``placement bound`` and the study give a seed the run's node order and arrivals."""
    nodes_path, pods_path = small_trace
    nodes, pods = load_nodes(nodes_path), load_pods(pods_path)
    trace = TraceRef("openb_pod_list_default", pods_path)
    spec = StudySpec(nodes_path=nodes_path, traces=(trace,), policies=(), seeds=(6,))
    for seed in (6, 7):
        config = ExperimentConfig(seed=seed)
        ordered, arrived = bound_inputs(nodes, pods, config)
        run_nodes = set_up(nodes, pods, config).state.nodes
        assert [n.name for n in ordered] == [n.name for n in run_nodes]
        assert arrived == arrived_until(pods, sum(n.num_gpu for n in nodes) * 1000, seed, 1.3)
        doc = bound_document(trace, nodes_path, seed, 1.3)
        for kind, key in (("clairvoyant", "clairvoyant"), ("bound", "lp_bound")):
            figure = run_task(spec, (kind, 0, "", seed))["pct"]
            assert figure == pytest.approx(doc[f"{key}_unallocated_pct"])
