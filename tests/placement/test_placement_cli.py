"""``arkgpu placement run|bench`` end to end on a small trace, as a user calls them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.cli.main import main
from arkgpu.sim.placing import ExperimentConfig, run_placement
from arkgpu.traces.openb import load_nodes, load_pods


def test_run_prints_json_with_curves(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``placement run --json`` prints the unallocated figure and 131-point curves."""
    nodes, pods = small_trace
    assert (
        main(
            [
                "placement",
                "run",
                "--trace",
                str(pods),
                "--nodes",
                str(nodes),
                "--policy",
                "fgd",
                "--seed",
                "1",
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["policy"] == "fgd"
    assert len(doc["allocation_pct"]) == 131
    assert 0.0 <= doc["unallocated_gpu_pct_at_100"] <= 100.0
    assert 0 <= doc["cpu_only_pods_failed_at_100"] <= doc["pods_failed"]


def test_bench_writes_json_and_plot(small_trace: tuple[Path, Path], tmp_path: Path) -> None:
    """``placement bench`` writes mean, sd, per_seed, wall_s, peak_rss_mb per policy, and a PNG."""
    nodes, pods = small_trace
    out, plot = tmp_path / "b.json", tmp_path / "b.png"
    code = main(
        [
            "placement",
            "bench",
            "--trace",
            str(pods),
            "--nodes",
            str(nodes),
            "--policies",
            "bestfit,fgd",
            "--seeds",
            "1-2",
            "--jobs",
            "2",
            "--json",
            str(out),
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    for name in ("bestfit", "fgd"):
        p = doc["policies"][name]
        assert len(p["per_seed"]) == 2
        assert len(p["wall_s"]) == 2
        assert p["unallocated_gpu_pct_at_100"] == pytest.approx(sum(p["per_seed"]) / 2)
        assert p["peak_rss_mb"] > 10
        assert p["published_mean"] is None  # not a trace FGD published
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_trace_path_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing trace file exits 2 naming the file."""
    assert main(["placement", "run", "--trace", str(tmp_path / "none.csv"), "--policy", "fgd"]) == 2
    assert "none.csv" in capsys.readouterr().err


def test_malformed_trace_names_line_and_field(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed pod file exits 2 with file, line and field in the message."""
    nodes, pods = small_trace
    pods.write_text(pods.read_text().replace("p001,8000", "p001,eight"))
    assert (
        main(["placement", "run", "--trace", str(pods), "--nodes", str(nodes), "--policy", "fgd"])
        == 2
    )
    assert "pods.csv:3: field 'cpu_milli'" in capsys.readouterr().err


def test_bad_seed_list_is_rejected(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seeds 5-1`` is an error, not an empty bench."""
    nodes, pods = small_trace
    assert (
        main(["placement", "bench", "--trace", str(pods), "--nodes", str(nodes), "--seeds", "5-1"])
        == 2
    )
    assert "end before start" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [[], ["--list-node-order"]])
def test_run_node_order_flag_reaches_the_experiment(
    small_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    """``--list-node-order`` runs the old protocol's ties; without it the per-seed order.

    Seed 6 is one where the two orders end differently on the small trace (17.4% and 8.7%).
    """
    nodes, pods = small_trace
    argv = ["placement", "run", "--trace", str(pods), "--nodes", str(nodes), "--policy", "fgd"]
    assert main([*argv, "--seed", "6", "--json", *flag]) == 0
    doc = json.loads(capsys.readouterr().out)
    trace = load_nodes(nodes), load_pods(pods)
    configs = {s: ExperimentConfig(seed=6, shuffle_nodes=s) for s in (True, False)}
    runs = {shuffle: run_placement(*trace, "fgd", c).at(100) for shuffle, c in configs.items()}
    assert runs[True] != pytest.approx(runs[False])
    assert doc["unallocated_gpu_pct_at_100"] == pytest.approx(runs[not flag])
