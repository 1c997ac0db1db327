"""``arkgpu demo``: ArkGPU's main comparisons on the embedded data, as one HTML report."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from arkgpu.cli.options import OutputDir, integer, jobs_option, output_dir

PARTS = ("placement", "colocation", "limiter", "node")


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
        "--out",
        metavar="DIR",
        type=output_dir,
        default=OutputDir(Path("out")),
        help="folder for the report, created if missing (default: out)",
    )
    demo.add_argument(
        "--seeds",
        metavar="N",
        type=integer(1, 10),
        default=2,
        help="number of placement seeds, from 42 on, 1 to 10 (default: 2)",
    )
    jobs_option(demo, 2)
    demo.add_argument(
        "--only",
        metavar="PART",
        choices=PARTS,
        action="append",
        help=f"run this part only: {', '.join(PARTS)}; repeatable (default: every part)",
    )
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the parts, print their tables, write the report."""
    args.out.prepare()
    from arkgpu.bench import report, report_html  # noqa: PLC0415 - heavy; after the checks

    config = dataclasses.replace(
        report.DemoConfig(), seeds=tuple(range(42, 42 + args.seeds)), jobs=args.jobs
    )
    only = tuple(args.only or PARTS)
    benches = tuple(p for p in only if p != "node")
    results = report.run_demo(config, benches) if benches else report.DemoResults(config)
    for line in report.summary_lines(results):
        print(line)
    extra: list[report_html.Section] = []
    if "node" in only:
        from arkgpu.cli import demo_node  # noqa: PLC0415 - the node runtime, after the benches

        section, took = demo_node.node_section(args.out.path)
        results.wall_s["node"] = took
        if section.failed is not None:
            results.failed["node"] = section.failed
        print(demo_node.summary_line(section))
        extra.append(section)
    page = report_html.write_report(results, args.out.path, extra)
    print(f"Report: {page.resolve()} (figures as PNG and results as JSON beside it)")
    for part, reason in results.failed.items():
        print(f"arkgpu: error: demo part {part} did not run: {reason}", file=sys.stderr)
    return 1 if results.failed else 0
