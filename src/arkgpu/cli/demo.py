"""``arkgpu demo``: ArkGPU's main comparisons on the embedded default data."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from arkgpu.bench.placement import BenchSpec
from arkgpu.cli.placement import run_and_report
from arkgpu.traces.catalog import default_node_list, resolve_pod_trace

FGD_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    demo = subparsers.add_parser("demo", help="run the main comparisons on embedded data")
    demo.add_argument("--out", type=Path, default=Path("out"), help="directory for plots and JSON")
    demo.add_argument("--seeds", type=int, default=3, help="seeds per placement policy (42..)")
    demo.add_argument("--jobs", type=int, default=2, help="worker processes")
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Placement: the FGD paper's six policies on the default trace beside the published figures."""
    console = Console(width=120)
    args.out.mkdir(parents=True, exist_ok=True)
    trace = resolve_pod_trace("default")
    console.rule("Placement: FGD's six policies on the openb default trace (simulated)")
    spec = BenchSpec(
        default_node_list(),
        trace.path,
        trace.label,
        FGD_POLICIES,
        tuple(range(42, 42 + args.seeds)),
        jobs=args.jobs,
    )
    run_and_report(spec, args.out / "placement.json", args.out / "placement.png", console)
    return 0
