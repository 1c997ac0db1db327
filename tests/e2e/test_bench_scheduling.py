"""The control-plane benchmark's harness, run small so that it cannot rot.

``python -m tests.e2e.bench_scheduling`` measures 1,000 nodes and 1,000 pods in
minutes (docs/studies/k8s-scale.md); here the same code runs 20 nodes and 20
pods through kube-scheduler alone on the session's control plane, and the
bodies and configurations it sends are checked against the contract.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from kubernetes import client as k8s

from arkgpu.k8s import contract, gpu_requests

from . import bench_config as cfg
from .bench_run import headline, run_benchmark, summarise
from .bench_scheduling import build_parser, main, settings_from
from .bench_watch import PhaseResult, percentile
from .controlplane import ControlPlane, build_control_plane


def test_nodes_and_pods_follow_the_contract() -> None:
    """Nodes: 8 GPUs in the inventory, 80 virtual devices; pods: a quarter whole GPUs."""
    settings = cfg.BenchSettings()
    gpus = contract.NodeInventory.from_json(cfg.inventory("n-1", settings.gpus_per_node)).gpus
    assert [g.index for g in gpus] == list(range(8))
    assert len({g.uuid for g in gpus}) == 8
    assert cfg.node_resources(settings)[contract.RESOURCE_GPU] == "80"
    limits = [cfg.pod_limits(settings, "extender", i) for i in range(8)]
    requests = [gpu_requests.gpu_request(lim, f"pod {i}") for i, lim in enumerate(limits)]
    assert [r.cores_percent for r in requests] == [None, 25, 25, 25] * 2
    assert all(r.count == 1 for r in requests)
    assert all(cfg.pod_limits(settings, "stock", i) == {"nvidia.com/gpu": "1"} for i in range(8))


def test_extender_phase_configures_every_managed_resource() -> None:
    """The extender phase's KubeSchedulerConfiguration: one profile, the four verbs' fields."""
    config = cfg.scheduler_config(Path("/k"), "extender", 5000, "http://127.0.0.1:1")
    assert [p["schedulerName"] for p in config["profiles"]] == [contract.SCHEDULER_NAME]
    (extender,) = config["extenders"]
    # the filter keeps one node: kube-scheduler would never call prioritize
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["bindVerb"]) == (
        "filter",
        "",
        "bind",
    )
    old = cfg.BenchSettings(extender_settings=("filter_chosen_only = false",))
    assert cfg.prioritizes(old, "extender")
    assert cfg.prioritizes(cfg.BenchSettings(), "null")
    assert not cfg.prioritizes(cfg.BenchSettings(), "extender")
    assert extender["nodeCacheCapable"] is True
    managed = {m["name"]: m["ignoredByScheduler"] for m in extender["managedResources"]}
    assert managed == dict.fromkeys(contract.MANAGED_RESOURCES, True)
    stock = cfg.scheduler_config(Path("/k"), "stock", 5000, None)
    assert "extenders" not in stock
    assert stock["clientConnection"]["qps"] == 5000


def test_hami_phase_has_its_charts_extender_and_its_device_plugins_annotations() -> None:
    """hami: filter and bind (no prioritize), HAMi's managed resources; each node's register
    annotation lists the inventory's GPUs with the split count; the command line needs the
    binary with the phase."""
    config = cfg.scheduler_config(Path("/k"), "hami", 5000, "http://127.0.0.1:1")
    assert [p["schedulerName"] for p in config["profiles"]] == [cfg.HAMI_SCHEDULER]
    (hami,) = config["extenders"]
    assert (hami["filterVerb"], hami["bindVerb"], "prioritizeVerb" in hami) == (
        "filter",
        "bind",
        False,
    )
    assert {m["name"] for m in hami["managedResources"]} >= {"nvidia.com/gpu", "nvidia.com/gpumem"}
    settings = cfg.BenchSettings()
    notes = cfg.hami_annotations("n-1", settings, "2026-12-07 14:00:00")
    devices = json.loads(notes[cfg.HAMI_REGISTER])
    inventory = contract.NodeInventory.from_json(cfg.inventory("n-1", settings.gpus_per_node))
    assert [d["id"] for d in devices] == [g.uuid for g in inventory.gpus]
    assert {d["count"] for d in devices} == {settings.split_count}
    assert notes[cfg.HAMI_HANDSHAKE].startswith("Reported")
    assert cfg.pod_limits(settings, "hami", 1) == cfg.pod_limits(settings, "extender", 1)
    with pytest.raises(SystemExit):
        main(["--phases", "stock,hami"])


def _assignment(node: str, index: int, share_bp: int, memory_mib: int) -> str:
    gpu = contract.AssignedGpu(index, f"GPU-{node}-{index}", memory_mib, share_bp)
    return contract.PodAssignment(node, (gpu,)).to_json()


def test_overcommit_check_counts_gpus_over_compute_or_memory() -> None:
    """Shares up to 100% and memory up to the GPU's fit; one basis point or MiB more does not."""
    fits = [_assignment("a", 0, 5000, 40_000), _assignment("a", 0, 5000, 41_559)]
    assert cfg.overcommitted_gpus(fits) == 0
    assert cfg.overcommitted_gpus([*fits, _assignment("a", 1, 10_000, 0)]) == 0
    assert cfg.overcommitted_gpus([*fits, _assignment("a", 0, 1, 1)]) == 1
    whole_twice = [_assignment("b", 2, 5000, 0), _assignment("b", 2, 5000, 1)]
    assert cfg.overcommitted_gpus(whole_twice) == 1


def test_command_line_maps_to_settings() -> None:
    """The documented command line parses into the settings it names."""
    args = build_parser().parse_args(
        ["--nodes", "1000", "--pods", "500", "--rounds", "3", "--phases", "stock"]
    )
    settings = settings_from(args)
    assert (settings.nodes, settings.pods, settings.rounds) == (1000, 500, 3)
    assert settings.phases == ("stock",)
    assert settings.modes == ("live", "backlog", "steady")
    assert settings.steady_rate == 50.0


def _result(phase: str, round_: int, pods_per_s: float) -> PhaseResult:
    cpu = {"scheduler": 1.0}
    return PhaseResult(
        phase, "live", round_, 10, pods_per_s, pods_per_s, 100.0, 5.0, 9.0, 3, cpu, 0, 0
    )


def test_summary_gives_medians_and_ratios_within_and_across_rounds() -> None:
    """Ratios extender/stock: of the medians, and the median of each round's own ratio."""
    results = [
        _result("stock", 1, 100.0),
        _result("extender", 1, 50.0),
        _result("stock", 2, 40.0),
        _result("extender", 2, 30.0),
        _result("stock", 3, 80.0),
        _result("extender", 3, 20.0),
    ]
    live = summarise(results)["live"]
    assert live["stock"]["pods_per_s"] == 80.0
    assert live["extender"]["pods_per_s"] == 30.0
    assert live["extender_ratio_pods_per_s"] == 30.0 / 80.0
    assert live["extender_round_ratios_pods_per_s"] == [0.5, 0.75, 0.25]
    assert live["extender_median_round_ratio_pods_per_s"] == 0.5
    assert "null_ratio_pods_per_s" not in live
    assert not any("ratio" in key for key in summarise(results[::2])["live"])
    backlog = [dataclasses.replace(r, mode="backlog") for r in results]
    assert headline(summarise(backlog)) == {"extender_over_alone_backlog": 0.5}


def test_percentile_is_nearest_rank() -> None:
    """p50 of 1..100 is 50, p99 is 99, p100 the largest; one value is every percentile."""
    values = [float(v) for v in range(100, 0, -1)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50.0,
        99.0,
        100.0,
    )
    assert percentile([7.0], 1) == percentile([7.0], 99) == 7.0


def test_small_run_binds_every_pod_and_cleans_up(
    control_plane: ControlPlane, api: k8s.ApiClient
) -> None:
    """20 nodes, 20 pods, kube-scheduler alone then through the null extender: every pod
    bound, the figures consistent, a ratio, no node left behind."""
    settings = cfg.BenchSettings(
        nodes=20, pods=20, rounds=1, phases=("stock", "null"), modes=("live",), workers=4
    )
    lines: list[str] = []
    report = run_benchmark(control_plane, build_control_plane(), settings, lines.append)
    json.dumps(report)  # the report is JSON as it stands
    stock, null = report["results"]
    assert [(r["phase"], r["mode"], r["pods"]) for r in (stock, null)] == [
        ("stock", "live", 20),
        ("null", "live", 20),
    ]
    for result in (stock, null):
        assert 0 < result["pods_per_s"] <= result["creates_per_s"] * 1.01
        assert 0 < result["latency_p50_ms"] <= result["latency_p99_ms"]
        assert 1 <= result["nodes_used"] <= 20
        assert all(ms >= 0 for ms in result["cpu_ms_per_pod"].values())
        assert (result["assigned"], result["overcommitted_gpus"]) == (0, 0)
    assert set(stock["cpu_ms_per_pod"]) == {"scheduler", "apiserver", "etcd"}
    assert set(null["cpu_ms_per_pod"]) == {"scheduler", "extender", "apiserver", "etcd"}
    live = report["summary"]["live"]
    assert live["stock"]["pods_per_s"] == stock["pods_per_s"]
    assert live["null_ratio_pods_per_s"] == null["pods_per_s"] / stock["pods_per_s"]
    assert lines[0].startswith("20 nodes created")
    leftover = k8s.CoreV1Api(api).list_node(label_selector=cfg.BENCH_LABEL).items
    assert leftover == []
