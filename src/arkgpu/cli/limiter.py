"""``arkgpu limiter``: the resource limiter's commands."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from arkgpu.bench.limiter_lending import LendingConfig, run_lending_bench
from arkgpu.cli import figures
from arkgpu.cli.options import input_dir, json_option, number, number_list, plot_option, reading
from arkgpu.cli.tables import Column, console, label, make_table
from arkgpu.limiter.benchmarking import BenchConfig, plot_report, run_bench
from arkgpu.limiter.lending import lender_usage, lends_now
from arkgpu.limiter.region import Limits, read_limits, read_usage

QUICK = BenchConfig(
    shares=(30.0, 70.0), seconds=0.5, launch_calls=20_000, mem_calls=10_000, repeats=1
)
QUICK_LENDING = LendingConfig(phase_s=0.6, check_calls=20_000, repeats=1)
SECONDS_MAX = 3600.0
"""Longest ``--seconds`` accepted."""


def register(subparsers: Any) -> None:
    """Add ``limiter bench`` and ``limiter show``."""
    parser = subparsers.add_parser("limiter", help="resource limiter: benchmark, inspect regions")
    sub = parser.add_subparsers(dest="limiter_command", required=True, metavar="COMMAND")
    bench = sub.add_parser("bench", help="overhead and share accuracy on the fake GPU")
    json_option(bench, "the report")
    bench.add_argument(
        "--quick", action="store_true", help="short runs (a smoke test, not figures)"
    )
    plot_option(bench, "achieved against set share")
    bench.add_argument(
        "--seconds",
        metavar="S",
        type=number(0.0, SECONDS_MAX, low_open=True),
        help=f"length of each share run in seconds, 0 < S <= {SECONDS_MAX:g} "
        f"(default: {BenchConfig().seconds:g}, --quick: {QUICK.seconds:g})",
    )
    bench.add_argument(
        "--shares",
        metavar="PCTS",
        type=number_list(0.0, 100.0),
        help="hard-mode shares to test, a comma list of percent, each > 0 and < 100 "
        f"(default: {','.join(f'{s:g}' for s in BenchConfig().shares)})",
    )
    bench.set_defaults(handler=bench_command)
    show = sub.add_parser("show", help="print a container region's limits and usage")
    show.add_argument(
        "region", type=input_dir, help="the container's region folder (limits and usage files)"
    )
    show.set_defaults(handler=show_command)


def _config(args: argparse.Namespace) -> BenchConfig:
    cfg = QUICK if args.quick else BenchConfig()
    if args.seconds is not None:
        cfg = replace(cfg, seconds=args.seconds)
    if args.shares:
        cfg = replace(cfg, shares=args.shares)
    return cfg


def bench_command(args: argparse.Namespace) -> int:
    """Run the benchmark; print a summary and optionally the JSON report."""

    def progress(msg: str) -> None:
        print(f"... {msg}", file=sys.stderr, flush=True)

    report = run_bench(_config(args), progress)
    report["lending"] = run_lending_bench(
        QUICK_LENDING if args.quick else LendingConfig(), progress
    )
    if args.json_out is None or not args.json_out.to_stdout:
        _print_report(report)
    if args.plot:
        plot_report(report, args.plot.path)
    if args.json_out is not None:
        args.json_out.write_json(report)
    return 0


def _print_report(report: dict[str, Any]) -> None:
    out = console()
    cost = make_table(
        "limiter cost and accuracy (fake GPU)",
        (label("what"), Column("figure", "lower")),
        na="the change was not seen within the measuring window",
    )
    cost.add_row(
        "launch overhead (no pacing)",
        figures.scaled_duration(report["launch_overhead_ns"], figures.NS),
    )
    cost.add_row(
        "memory call overhead", figures.scaled_duration(report["memcall_overhead_ns"], figures.NS)
    )
    cost.add_row("share error, worst case", f"{report['share_error_pts_max']:.2f} points")
    cost.add_row(
        "share change latency, worst case",
        figures.scaled_duration(report["share_change_latency_ms"], figures.MS),
    )
    out.print(cost)
    out.print(_share_table(report))
    _print_lending(report["lending"])


def _share_table(report: dict[str, Any]) -> Any:
    table = make_table(
        "achieved compute share against the share set",
        (
            label("case"),
            Column("set"),
            Column("alone"),
            Column("beside a busy co-runner"),
            Column("co-runner achieved (set)"),
        ),
        notes=("closer to the set share is better",),
        na="not measured",
    )
    for case in report["share_cases"]:
        table.add_row(
            "hard",
            figures.percent(case["share_pct"], 0),
            figures.percent(case["alone_pct"]),
            figures.percent(case["beside_pct"]),
            f"{figures.percent(case['corunner_pct'])} "
            f"({figures.percent(case['corunner_share_pct'], 0)})",
        )
    el = report["elastic"]
    table.add_row(
        "elastic",
        figures.percent(el["share_pct"], 0),
        figures.percent(el["alone_pct"]),
        figures.percent(el["beside_pct"]),
        f"{figures.percent(el['corunner_pct'])} "
        f"({figures.percent(el['corunner_hard_share_pct'], 0)} hard)",
    )
    return table


def _print_lending(lend: dict[str, Any]) -> None:
    back = figures.scaled_duration(lend["give_back_ms"], figures.MS)
    up = figures.scaled_duration(lend["take_up_ms"], figures.MS)
    check = figures.scaled_duration(lend["lend_check_ns"], figures.NS)
    print(
        f"lending: BE at {lend['be_share_pct']:.0f}% + {lend['lent_pct']:.0f}% lent achieves"
        f" {lend['in_flight_pct']:.2f}% with an LC batch in flight, {lend['idle_pct']:.2f}%"
        f" while the LC is idle; given back in {back}, taken up in {up} (lower is better;"
        f" n/a: not within the window); lender check {check} per paced launch"
    )


def show_command(args: argparse.Namespace) -> int:
    """Print a region's limits and per-process usage."""
    with reading("region", args.region):
        limits, usage = read_limits(args.region), read_usage(args.region)
    print(f"limits: {limits}")
    used = usage.used_bytes[: max(len(limits.memory_bytes), 1)]
    print(f"used per GPU: {', '.join(figures.size(b) for b in used)}")
    for p in usage.processes:
        print(
            f"  pid {p.pid}{'' if p.alive else ' (gone)'}: {figures.size(p.total_bytes)}, "
            f"busy {figures.scaled_duration(p.busy_ns, figures.NS)}, {p.launches:,} launches, "
            f"throttled {figures.scaled_duration(p.throttled_ns, figures.NS)}, "
            f"{p.oom_refusals:,} memory refusals"
        )
    print(f"LC batches in flight: {usage.batches_in_flight} (begun {usage.batches_begun:,})")
    _print_lenders(args.region, limits)
    return 0


def _print_lenders(region: Path, limits: Limits) -> None:
    """One line per lender: its lent share and what lenders/<k> says now."""
    if not limits.lent_bp:
        return
    print(f"lending: {len(limits.lent_bp)} lenders, stale after {limits.lend_stale_ms} ms")
    now = time.monotonic_ns()
    for k, bp in enumerate(limits.lent_bp):
        lender = lender_usage(region, k)
        if lender is None:
            state = f"lenders/{k} missing or of another layout: lends nothing"
        else:
            lending = "lending" if lends_now(lender, limits.lend_stale_ms, now) else "not lending"
            state = f"{lender.batches_in_flight} batches in flight, {lending}"
        print(f"  lender {k}: {bp} bp; {state}")
