"""``arkgpu placement run|bench``: the FGD placement experiment from the command line."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from arkgpu.bench.placement import (
    TABLE_HEADER,
    BenchSpec,
    bench_report,
    parse_seeds,
    run_bench,
    table_rows,
)
from arkgpu.bench.plots import plot_allocation
from arkgpu.cli.placement_anatomy import register_anatomy
from arkgpu.cli.placement_tools import register_tools
from arkgpu.cli.placement_variants import register_variants
from arkgpu.placement import POLICIES
from arkgpu.sim.placing import ExperimentConfig, run_placement
from arkgpu.traces.catalog import (
    TraceRef,
    default_node_list,
    openb_search_dirs,
    published_allocation_curves,
    published_unallocated,
    resolve_pod_trace,
)
from arkgpu.traces.openb import load_nodes, load_pods


def trace_dirs() -> list[Path]:
    """Where openb names other than ``default`` are looked up (see :func:`openb_search_dirs`)."""
    return openb_search_dirs()


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="default", help="pod CSV, 'default', or an openb name")
    parser.add_argument(
        "--nodes", type=Path, default=None, help="node CSV (default: openb GPU nodes)"
    )
    parser.add_argument("--inflate", type=float, default=1.3, help="arrivals as x capacity")
    parser.add_argument(
        "--list-node-order",
        action="store_true",
        help="break ties in the node list's order, not a per-seed one (protocol before 2026-12-03)",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``placement run`` and ``placement bench``."""
    group = subparsers.add_parser("placement", help="level-1 placement on the openb trace")
    sub = group.add_subparsers(dest="placement_command", required=True, metavar="SUBCOMMAND")
    run = sub.add_parser("run", help="one policy, one seed")
    _common(run)
    run.add_argument("--policy", required=True, choices=POLICIES.names())
    run.add_argument("--seed", type=int, default=42)
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.set_defaults(handler=cmd_run)
    bench = sub.add_parser("bench", help="policies x seeds, beside FGD's published figures")
    _common(bench)
    bench.add_argument("--policies", default="random,dotprod,clustering,packing,bestfit,fgd")
    bench.add_argument("--seeds", default="42-51")
    bench.add_argument("--jobs", type=int, default=1, help="worker processes (1: clean timings)")
    bench.add_argument("--json", type=Path, default=None, dest="json_out", help="write JSON here")
    bench.add_argument("--plot", type=Path, default=None, help="write a PNG here")
    bench.set_defaults(handler=cmd_bench)
    register_tools(sub)
    register_anatomy(sub)
    register_variants(sub)


def _resolve(args: argparse.Namespace) -> tuple[TraceRef, Path]:
    trace = resolve_pod_trace(args.trace, trace_dirs())
    return trace, args.nodes or default_node_list()


def cmd_run(args: argparse.Namespace) -> int:
    """Run one policy and seed; print unallocated GPU % at 100% arrived (or JSON)."""
    trace, nodes_path = _resolve(args)
    result = run_placement(
        load_nodes(nodes_path),
        load_pods(trace.path),
        args.policy,
        ExperimentConfig(
            inflate=args.inflate, seed=args.seed, shuffle_nodes=not args.list_node_order
        ),
    )
    published = published_unallocated(trace.label).get(args.policy)
    cpu_failed, cpu_failed_cores = result.cpu_only_failed_at(100)
    doc = {
        "trace": trace.label,
        "policy": args.policy,
        "seed": args.seed,
        "unallocated_gpu_pct_at_100": result.at(100),
        "unallocated_gpu_pct_at_130": result.at(130),
        "pods_arrived": result.pods_arrived,
        "pods_failed": result.pods_failed,
        "cpu_only_pods_failed_at_100": cpu_failed,
        "cpu_only_cores_failed_at_100": cpu_failed_cores,
        "wall_s": result.wall_s,
        "decision_ms_median": statistics.median(result.decision_s) * 1e3,
        "published_mean": published.mean if published else None,
        "allocation_pct": result.allocation_pct.tolist(),
        "frag_pct": result.frag_pct.tolist(),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    pub = f" (FGD published mean {published.mean:.2f})" if published else ""
    print(
        f"{trace.label} {args.policy} seed {args.seed}: "
        f"{result.at(100):.2f}% of GPU capacity unallocated at 100% arrived{pub}; "
        f"{result.pods_failed}/{result.pods_arrived} pods failed; {result.wall_s:.1f} s"
    )
    return 0


def print_table(report: dict[str, object], console: Console) -> None:
    """Print the bench table."""
    table = Table(
        title=f"{report['trace']}, seeds {report['seeds'][0]}..{report['seeds'][-1]}"  # type: ignore[index]
        " (simulated on the openb trace)"
    )
    for column in TABLE_HEADER:
        table.add_column(column)
    for row in table_rows(report):
        table.add_row(*row)
    console.print(table)


def run_and_report(
    spec: BenchSpec, json_out: Path | None, plot: Path | None, console: Console
) -> dict[str, object]:
    """Run the bench with a progress bar, print the table, write JSON and plot."""
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("placement runs", total=len(spec.policies) * len(spec.seeds))
        stats = run_bench(spec, lambda label: progress.update(task, advance=1, description=label))
    report = bench_report(spec, stats)
    print_table(report, console)
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
        console.print(f"JSON written to {json_out}")
    if plot is not None:
        policies = report["policies"]
        assert isinstance(policies, dict)
        ours = {name: p["allocation_pct_mean"] for name, p in policies.items()}
        plot_allocation(
            plot, f"{spec.label} (simulated)", ours, published_allocation_curves(spec.label)
        )
        console.print(f"plot written to {plot}")
    return report


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the bench and report."""
    trace, nodes_path = _resolve(args)
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    for name in policies:
        if name not in POLICIES.names():
            raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES.names())})")
    spec = BenchSpec(
        nodes_path,
        trace.path,
        trace.label,
        policies,
        parse_seeds(args.seeds),
        inflate=args.inflate,
        jobs=args.jobs,
        shuffle_nodes=not args.list_node_order,
    )
    run_and_report(spec, args.json_out, args.plot, Console(width=120))
    return 0
