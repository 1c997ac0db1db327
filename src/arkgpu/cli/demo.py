"""``arkgpu demo``: ArkGPU's main comparisons on the embedded data, as one HTML report."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

PARTS = ("placement", "colocation", "limiter")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    demo = subparsers.add_parser(
        "demo",
        help="run the main comparisons (about 2 min) and write out/report.html",
        description="Placement, co-location and limiter comparisons on the embedded data, "
        "shrunk to about two minutes on two cores; writes report.html (one self-contained "
        "page), its figures as PNG and the measured JSON documents.",
    )
    demo.add_argument(
        "--out", type=Path, default=Path("out"), help="directory for the report (default: out)"
    )
    demo.add_argument(
        "--seeds", type=int, default=2, help="placement seeds from 42, at least 1 (default: 2)"
    )
    demo.add_argument(
        "--jobs", type=int, default=2, help="worker processes, at least 1 (default: 2)"
    )
    demo.add_argument(
        "--only", choices=PARTS, action="append", help="run this part only (repeatable)"
    )
    demo.set_defaults(handler=cmd_demo)


def check(args: argparse.Namespace) -> None:
    """Every value checked before any work starts; the message names the option."""
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out}: exists and is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the parts, print their tables, write the report."""
    check(args)
    from arkgpu.bench import report, report_html  # noqa: PLC0415 - heavy; after the checks

    config = dataclasses.replace(
        report.DemoConfig(), seeds=tuple(range(42, 42 + args.seeds)), jobs=args.jobs
    )
    results = report.run_demo(config, tuple(args.only or ()))
    for line in report.summary_lines(results):
        print(line)
    page = report_html.write_report(results, args.out)
    print(f"Report: {page.resolve()} (figures as PNG and results as JSON beside it)")
    for part, reason in results.failed.items():
        print(f"arkgpu: error: demo part {part} did not run: {reason}", file=sys.stderr)
    return 1 if results.failed else 0
