"""The commands' tables render their documents in human units, with n/a where a figure
does not exist (a skipped mode, an infinite ratio, a change never seen)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from arkgpu.cli import colocate_tables
from arkgpu.cli.limiter import _print_report
from arkgpu.cli.placement import print_table


def _text(renderable: Any) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def _mode(goodput: float) -> dict[str, Any]:
    return {
        "goodput_rps": goodput,
        "normalized_goodput": goodput / 1000,
        "slo_attainment_min_pct": 99.5,
        "lc_throughput_rps": goodput,
        "be_throughput_norm": 0.25,
        "gpus_used": 4.0,
        "gpu_util_pct": 61.0,
        "wall_s": 75.0,
        "cpu_s": 70225.0,
        "lc": [
            {
                "name": "a",
                "state": "done",
                "slo_attainment_pct": 99.5,
                "p99_ms": None,
                "target_ms": 50.0,
            }
        ],
        "be": [{"name": "b", "state": "running", "throughput_norm": 0.25}],
    }


COLOCATION_DOC: dict[str, Any] = {
    "scenario": "paper",
    "seeds": [1, 2, 3],
    "note": "simulated",
    "modes": {"k8s-native": _mode(0.0), "arkgpu": _mode(1234.5)},
    "skipped": {"mig": "needs A100"},
    "ratios": {"arkgpu_vs_k8s-native": float("inf")},
    "ratio_details": {
        "arkgpu_vs_k8s-native": {
            "normalized_goodput": float("inf"),
            "goodput_rps": 1.5,
            "lc_throughput_rps": 1.5,
            "be_throughput_norm": 1.0,
        }
    },
}


def test_colocation_tables_use_human_units_and_na() -> None:
    """Rates with prefixes, durations in h/min, a skipped mode and an infinite ratio as n/a."""
    text = _text(colocate_tables.bench_table(COLOCATION_DOC))
    assert "1.23 k/s" in text
    assert "19 h 30 min" in text  # 70225 s of CPU
    assert "needs A100" in text
    assert "seeds 1-3" in text
    ratios = _text(colocate_tables.ratio_table(COLOCATION_DOC))
    assert "n/a" in ratios
    assert "+50.0%" in ratios
    assert "n/a: the other mode served nothing" in ratios
    run = _text(colocate_tables.run_tables(COLOCATION_DOC))
    assert "n/a (50.0 ms)" in run


def test_sensitivity_table_names_each_baseline() -> None:
    """One column per baseline, arkgpu's change over it, higher is better."""
    doc = {"scenario": "paper", "seeds": [1], "cases": {"peak 1.0x": COLOCATION_DOC}}
    text = _text(colocate_tables.sensitivity_table(doc))
    assert "vs k8s-native ↑" in text
    assert "peak 1.0x" in text


def test_placement_bench_table_in_human_units() -> None:
    """Run time, decision time and memory in human units; no published figure is n/a."""
    policy = {
        "unallocated_gpu_pct_at_100": 5.06,
        "sd": 0.1,
        "published_mean": None,
        "published_sd": None,
        "wall_s_median": 28.2,
        "cpu_s_median": 27.0,
        "decision_ms_median": 0.0123,
        "decision_ms_p99": 24.441728,
        "peak_rss_mb": 200.0,
    }
    report = {"trace": "t", "seeds": [42, 43], "policies": {"arkgpu": policy}}
    console = Console(width=200, record=True)
    print_table(report, console)
    text = console.export_text()
    assert "12.3 µs / 24.4 ms" in text
    assert "200 MiB" in text
    assert "n/a: FGD published no figure" in text


def test_limiter_report_prints_na_for_a_change_never_seen(capsys: Any) -> None:
    """``share_change_latency_ms`` None (not seen in the window) prints n/a, not a crash."""
    report = {
        "launch_overhead_ns": 850.0,
        "memcall_overhead_ns": 1200.0,
        "share_error_pts_max": 1.5,
        "share_change_latency_ms": None,
        "share_cases": [
            {
                "share_pct": 30.0,
                "alone_pct": 29.5,
                "beside_pct": 30.2,
                "corunner_pct": 69.0,
                "corunner_share_pct": 70.0,
            }
        ],
        "elastic": {
            "share_pct": 30.0,
            "alone_pct": 95.0,
            "beside_pct": 31.0,
            "corunner_pct": 68.0,
            "corunner_hard_share_pct": 70.0,
        },
        "lending": {
            "be_share_pct": 30.0,
            "lent_pct": 50.0,
            "in_flight_pct": 30.1,
            "idle_pct": 79.0,
            "give_back_ms": 12.5,
            "take_up_ms": None,
            "lend_check_ns": 40.0,
        },
    }
    _print_report(report)
    out = capsys.readouterr().out
    assert "850 ns" in out
    assert "1.20 µs" in out
    assert "12.5 ms" in out
    assert "n/a" in out
