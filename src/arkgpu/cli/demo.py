"""``arkgpu demo``: ArkGPU's main comparisons on the embedded default data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from arkgpu.bench import colocation
from arkgpu.bench.placement import BenchSpec
from arkgpu.cli.placement import run_and_report
from arkgpu.traces.catalog import default_node_list, resolve_pod_trace

DEMO_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd", "arkgpu")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    demo = subparsers.add_parser("demo", help="run the main comparisons on embedded data")
    demo.add_argument("--out", type=Path, default=Path("out"), help="directory for plots and JSON")
    demo.add_argument("--seeds", type=int, default=3, help="seeds per placement policy (42..)")
    demo.add_argument("--jobs", type=int, default=2, help="worker processes")
    demo.add_argument(
        "--only", choices=("placement", "colocation"), default=None, help="run one part only"
    )
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Placement beside FGD's published figures, then co-location on the paper scenario."""
    console = Console(width=120)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "placement"):
        demo_placement(args, console)
    if args.only in (None, "colocation"):
        demo_colocation(args, console)
    console.print(f"Results are in {args.out.resolve()}")
    return 0


def demo_placement(args: argparse.Namespace, console: Console) -> None:
    """The FGD paper's six policies and ArkGPU's own, beside the published figures."""
    trace = resolve_pod_trace("default")
    console.rule("Placement: FGD's six policies and arkgpu on the openb default trace (simulated)")
    spec = BenchSpec(
        default_node_list(),
        trace.path,
        trace.label,
        DEMO_POLICIES,
        tuple(range(42, 42 + args.seeds)),
        jobs=args.jobs,
    )
    run_and_report(spec, args.out / "placement.json", args.out / "placement.png", console)


def demo_colocation(args: argparse.Namespace, console: Console) -> None:
    """ArkGPU against k8s-native, time-slicing, MPS, HAMi and TGS on the paper scenario."""
    console.rule("Co-location: the paper scenario, 4 V100 over a 24 h cycle (simulated)")
    console.print("Ground truth: iGniter's measured V100 profiles; a few minutes on 2 cores.")
    spec = colocation.BenchSpec("paper", colocation.DEMO_MODES, (1,))
    doc = colocation.run_bench(spec, jobs=1)
    console.print(colocation.format_table(doc), highlight=False)
    (args.out / "colocation.json").write_text(json.dumps(doc, indent=2))
