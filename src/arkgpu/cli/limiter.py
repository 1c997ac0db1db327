"""``arkgpu limiter``: the resource limiter's commands."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from arkgpu.bench.limiter_lending import LendingConfig, run_lending_bench
from arkgpu.limiter.benchmarking import BenchConfig, plot_report, run_bench
from arkgpu.limiter.lending import lender_usage, lends_now
from arkgpu.limiter.region import Limits, read_limits, read_usage

QUICK = BenchConfig(
    shares=(30.0, 70.0), seconds=0.5, launch_calls=20_000, mem_calls=10_000, repeats=1
)
QUICK_LENDING = LendingConfig(phase_s=0.6, check_calls=20_000, repeats=1)


def register(subparsers: Any) -> None:
    """Add ``limiter bench`` and ``limiter show``."""
    parser = subparsers.add_parser("limiter", help="resource limiter: benchmark, inspect regions")
    sub = parser.add_subparsers(dest="limiter_command", required=True, metavar="ACTION")
    bench = sub.add_parser("bench", help="overhead and share accuracy on the fake GPU")
    bench.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the report as JSON (- for stdout)",
    )
    bench.add_argument(
        "--quick", action="store_true", help="short runs (a smoke test, not figures)"
    )
    bench.add_argument("--plot", type=Path, metavar="PNG", help="plot achieved against set share")
    bench.add_argument("--seconds", type=float, help="length of each share run, s")
    bench.add_argument("--shares", help="comma-separated hard-mode shares, percent")
    bench.set_defaults(handler=bench_command)
    show = sub.add_parser("show", help="print a container region's limits and usage")
    show.add_argument("region", type=Path)
    show.set_defaults(handler=show_command)


def _config(args: argparse.Namespace) -> BenchConfig:
    cfg = QUICK if args.quick else BenchConfig()
    changes: dict[str, Any] = {}
    if args.seconds is not None:
        if args.seconds <= 0:
            raise ValueError(f"--seconds must be positive, got {args.seconds}")
        changes["seconds"] = args.seconds
    if args.shares:
        shares = tuple(float(s) for s in args.shares.split(","))
        if any(not 0 < s < 100 for s in shares):
            raise ValueError(f"--shares must lie strictly between 0 and 100: {args.shares}")
        changes["shares"] = shares
    return BenchConfig(**{**cfg.__dict__, **changes})


def bench_command(args: argparse.Namespace) -> int:
    """Run the benchmark; print a summary and optionally the JSON report."""

    def progress(msg: str) -> None:
        print(f"... {msg}", file=sys.stderr)

    report = run_bench(_config(args), progress)
    report["lending"] = run_lending_bench(
        QUICK_LENDING if args.quick else LendingConfig(), progress
    )
    print(f"launch overhead: {report['launch_overhead_ns']:.1f} ns per launch (no pacing)")
    print(f"memory call overhead: {report['memcall_overhead_ns']:.1f} ns per call")
    print(f"share error: max {report['share_error_pts_max']:.2f} points")
    for case in report["share_cases"]:  # type: ignore[attr-defined]
        print(
            f"  share {case['share_pct']:4.0f}%: alone {case['alone_pct']:6.2f}%"
            f"  beside co-runner {case['beside_pct']:6.2f}% (co-runner {case['corunner_pct']:6.2f}%"
            f" of {case['corunner_share_pct']:.0f}%)"
        )
    el = report["elastic"]
    print(
        f"elastic {el['share_pct']:.0f}%: alone {el['alone_pct']:.2f}%, beside hard"  # type: ignore[index]
        f" {el['corunner_hard_share_pct']:.0f}%: {el['beside_pct']:.2f}%"  # type: ignore[index]
        f" (co-runner {el['corunner_pct']:.2f}%)"  # type: ignore[index]
    )
    print(f"share change latency: max {report['share_change_latency_ms']} ms")
    _print_lending(report["lending"])  # type: ignore[arg-type]
    if args.plot:
        plot_report(report, args.plot)
    if args.json == "-":
        json.dump(report, sys.stdout, indent=2)
        print()
    elif args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _print_lending(lend: dict[str, Any]) -> None:
    print(
        f"lending: BE at {lend['be_share_pct']:.0f}% + {lend['lent_pct']:.0f}% lent:"
        f" {lend['in_flight_pct']:.2f}% with an LC batch in flight, {lend['idle_pct']:.2f}%"
        f" while the LC is idle; given back in {lend['give_back_ms']} ms, taken up in"
        f" {lend['take_up_ms']} ms; lender check {lend['lend_check_ns']:.1f} ns per paced launch"
    )


def show_command(args: argparse.Namespace) -> int:
    """Print a region's limits and per-process usage."""
    limits, usage = read_limits(args.region), read_usage(args.region)
    print(f"limits: {limits}")
    print(f"used bytes per GPU: {usage.used_bytes[: max(len(limits.memory_bytes), 1)]}")
    for p in usage.processes:
        print(
            f"  pid {p.pid}{'' if p.alive else ' (gone)'}: {p.total_bytes} B, "
            f"busy {p.busy_ns / 1e6:.1f} ms, "
            f"{p.launches} launches, throttled {p.throttled_ns / 1e6:.1f} ms, "
            f"{p.oom_refusals} refusals"
        )
    print(f"LC batches in flight: {usage.batches_in_flight} (begun {usage.batches_begun})")
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
