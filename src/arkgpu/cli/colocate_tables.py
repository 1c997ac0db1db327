"""The ``colocate`` commands' tables, in the command line's one style."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from arkgpu.cli import figures
from arkgpu.cli.tables import Column, label, make_table

RATIO_NA = "the other mode served nothing, so no ratio exists"


def bench_table(doc: dict[str, Any]) -> Table:
    """One row per mode: goodput, SLO, throughput, GPUs, run time; skipped modes as n/a."""
    table = make_table(
        f"scenario {doc['scenario']}, seeds {_seeds(doc['seeds'])} (simulated)",
        (
            label("mode"),
            Column("goodput", "higher"),
            Column("norm. goodput", "higher"),
            Column("worst SLO", "higher"),
            Column("LC tput", "higher"),
            Column("BE GPUs", "higher"),
            Column("GPUs used", "lower"),
            Column("GPU util", "higher"),
            Column("wall"),
            Column("CPU"),
        ),
        notes=(
            "goodput: requests/s served within their target; norm.: over each service's "
            "goodput alone on a GPU; worst SLO: the lowest service's % of requests within "
            "target; BE GPUs: best-effort training done, in whole GPUs' worth",
            doc["note"],
            *(f"{mode} skipped: {reason}" for mode, reason in doc["skipped"].items()),
        ),
        na="the mode does not apply to this scenario (reason below)",
    )
    for mode, e in doc["modes"].items():
        table.add_row(
            mode,
            figures.rate(e["goodput_rps"]),
            f"{e['normalized_goodput']:.3f}",
            figures.percent(e["slo_attainment_min_pct"]),
            figures.rate(e["lc_throughput_rps"]),
            f"{e['be_throughput_norm']:.3f}",
            f"{e['gpus_used']:.1f}",
            figures.percent(e["gpu_util_pct"], 1),
            figures.duration(e["wall_s"]),
            figures.duration(e["cpu_s"]),
        )
    for mode in doc["skipped"]:
        table.add_row(mode, *[figures.NA] * 9)
    return table


def ratio_table(doc: dict[str, Any]) -> Table | None:
    """arkgpu's change over each other mode, or None without arkgpu."""
    if not doc["ratio_details"]:
        return None
    table = make_table(
        "arkgpu against each mode: change of arkgpu's figure over the mode's",
        (
            label("arkgpu vs"),
            Column("normalised goodput", "higher"),
            Column("goodput", "higher"),
            Column("LC throughput", "higher"),
            Column("BE throughput", "higher"),
        ),
        na=RATIO_NA,
    )
    for key, r in doc["ratio_details"].items():
        table.add_row(
            key.removeprefix("arkgpu_vs_"),
            *(
                figures.change(r[k])
                for k in (
                    "normalized_goodput",
                    "goodput_rps",
                    "lc_throughput_rps",
                    "be_throughput_norm",
                )
            ),
        )
    return table


def run_tables(doc: dict[str, Any]) -> Table:
    """Each service of a one-seed run: its state, SLO attainment and p99, or throughput."""
    table = make_table(
        "services (simulated)",
        (
            label("mode"),
            label("kind"),
            label("service"),
            label("state"),
            Column("SLO attainment", "higher"),
            Column("p99 latency (target)", "lower"),
            Column("BE GPUs", "higher"),
        ),
        na="no request served (p99) or not a figure of this kind of service",
    )
    for mode, entry in doc["modes"].items():
        for lc in entry["lc"]:
            p99 = None if lc["p99_ms"] is None else lc["p99_ms"] / 1e3
            table.add_row(
                mode,
                "LC",
                lc["name"],
                lc["state"],
                figures.percent(lc["slo_attainment_pct"]),
                f"{figures.duration(p99)} ({figures.duration(lc['target_ms'] / 1e3)})",
                figures.NA,
            )
        for be in entry["be"]:
            table.add_row(
                mode,
                "BE",
                be["name"],
                be["state"],
                figures.NA,
                figures.NA,
                f"{be['throughput_norm']:.3f}",
            )
    return table


def sensitivity_table(doc: dict[str, Any]) -> Table:
    """Rows: cases; columns: arkgpu's normalised-goodput change over each mode, its SLO."""
    first = next(iter(doc["cases"].values()))
    baselines = [k.removeprefix("arkgpu_vs_") for k in first["ratios"]]
    table = make_table(
        f"arkgpu's normalised goodput against each mode, scenario {doc['scenario']}, "
        f"seeds {_seeds(doc['seeds'])} (simulated)",
        (
            label("case"),
            *(Column(f"vs {b}", "higher") for b in baselines),
            Column("arkgpu worst SLO attainment", "higher"),
        ),
        na=RATIO_NA,
    )
    for case_label, case in doc["cases"].items():
        table.add_row(
            case_label,
            *(figures.change(case["ratios"].get(f"arkgpu_vs_{b}")) for b in baselines),
            figures.percent(case["modes"].get("arkgpu", {}).get("slo_attainment_min_pct")),
        )
    return table


def mps_table(doc: dict[str, Any]) -> Table:
    """One row per process count: measured / fair-split and measured / whole-GPU latency."""
    table = make_table(
        "measured MPS latency over solo latency (ParvaGPU A100-80GB, n identical processes)",
        (
            Column("processes n"),
            Column("rows"),
            Column("÷ fair split, median"),
            Column("p10"),
            Column("p90"),
            Column("÷ whole GPU, median"),
        ),
        notes=(
            "1.00: latency as the fair 1/n split predicts; above 1: slower than fair",
            f"{doc['skipped']} rows skipped (no solo shares around 1/n)",
        ),
    )
    for s in doc["summaries"]:
        table.add_row(
            str(s["processes"]),
            figures.count(s["count"]),
            f"{s['median']:.3f}",
            f"{s['p10']:.3f}",
            f"{s['p90']:.3f}",
            f"{s['whole_gpu_median']:.3f}",
        )
    return table


def _seeds(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)
