"""``arkgpu placement run|bench``: the FGD placement experiment from the command line."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console

from arkgpu.bench.placement import BenchSpec, bench_report, run_bench
from arkgpu.bench.plots import plot_allocation
from arkgpu.bench.progress import ProgressReporter
from arkgpu.cli import figures
from arkgpu.cli.options import (
    Output,
    jobs_option,
    json_option,
    plot_option,
    seed_option,
    seeds_option,
)
from arkgpu.cli.placement_anatomy import register_anatomy
from arkgpu.cli.placement_inputs import check_inputs, policy_arg, policy_names, trace_args
from arkgpu.cli.placement_tools import register_tools
from arkgpu.cli.placement_variants import register_variants
from arkgpu.cli.tables import Column, console, label, make_table
from arkgpu.sim.placing import ExperimentConfig, run_placement
from arkgpu.traces.catalog import (
    published_allocation_curves,
    published_unallocated,
)
from arkgpu.traces.openb import load_nodes, load_pods


def _common(parser: argparse.ArgumentParser) -> None:
    trace_args(parser)
    parser.add_argument(
        "--list-node-order",
        action="store_true",
        help="break ties in the node list's order, not a per-seed one (protocol before "
        "2026-12-03; default: per-seed order)",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``placement run``, ``bench`` and the tools."""
    group = subparsers.add_parser("placement", help="level-1 placement on the openb trace")
    sub = group.add_subparsers(dest="placement_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="one policy, one seed")
    _common(run)
    run.add_argument(
        "--policy",
        required=True,
        metavar="NAME",
        choices=policy_names(),
        help=f"placement policy: one of {', '.join(policy_names())} (required)",
    )
    seed_option(run, 42)
    json_option(run, "the result (with the 131-point curves)")
    run.set_defaults(handler=cmd_run)
    bench = sub.add_parser("bench", help="policies x seeds, beside FGD's published figures")
    _common(bench)
    policy_arg(bench, "--policies", "random,dotprod,clustering,packing,bestfit,fgd", "policies")
    seeds_option(bench, "42-51")
    jobs_option(bench, 1)
    json_option(bench, "the bench document")
    plot_option(bench, "unallocated GPU % against arrived workload, beside FGD's curves")
    bench.set_defaults(handler=cmd_bench)
    register_tools(sub)
    register_anatomy(sub)
    register_variants(sub)


def cmd_run(args: argparse.Namespace) -> int:
    """Run one policy and seed; print unallocated GPU % at 100% arrived (or JSON)."""
    inputs = check_inputs(args)
    result = run_placement(
        load_nodes(inputs.nodes_path),
        load_pods(inputs.trace.path),
        args.policy,
        ExperimentConfig(
            inflate=args.inflate, seed=args.seed, shuffle_nodes=not args.list_node_order
        ),
    )
    published = published_unallocated(inputs.trace.label).get(args.policy)
    cpu_failed, cpu_failed_cores = result.cpu_only_failed_at(100)
    doc = {
        "trace": inputs.trace.label,
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
    if args.json_out is not None:
        args.json_out.write_json(doc)
        if args.json_out.to_stdout:
            return 0
    pub = f" (FGD published mean {published.mean:.2f}%)" if published else ""
    print(
        f"{inputs.trace.label} {args.policy} seed {args.seed} (simulated): "
        f"{result.at(100):.2f}% of GPU capacity unallocated at 100% arrived, lower is "
        f"better{pub}; {figures.count(result.pods_failed)} of "
        f"{figures.count(result.pods_arrived)} pods failed; ran {figures.duration(result.wall_s)}"
    )
    return 0


def print_table(report: dict[str, Any], out: Console) -> None:
    """Print the bench table."""
    seeds = report["seeds"]
    table = make_table(
        f"{report['trace']}, seeds {seeds[0]}..{seeds[-1]} (simulated on the openb trace)",
        (
            label("policy"),
            Column("unallocated GPU %", "lower"),
            Column("FGD published"),
            Column("ours − FGD"),
            Column("run time wall / CPU", "lower"),
            Column("decision median / p99", "lower"),
            Column("peak memory", "lower"),
        ),
        notes=(
            "unallocated GPU %: share of GPU capacity left unallocated once the arrived pods "
            "ask for 100% of it, mean ± sd over seeds; run time: median per run",
        ),
        na="FGD published no figure for this policy on this trace",
    )
    for name, p in report["policies"].items():
        table.add_row(name, *_bench_cells(p))
    out.print(table)


def _bench_cells(p: dict[str, Any]) -> tuple[str, ...]:
    pub = p["published_mean"]
    return (
        f"{p['unallocated_gpu_pct_at_100']:.2f} ± {p['sd']:.2f}",
        figures.NA if pub is None else f"{pub:.2f} ± {p['published_sd']:.2f}",
        figures.NA if pub is None else f"{p['unallocated_gpu_pct_at_100'] - pub:+.2f}",
        f"{figures.duration(p['wall_s_median'])} / {figures.duration(p['cpu_s_median'])}",
        f"{figures.duration(p['decision_ms_median'] / 1e3)} / "
        f"{figures.duration(p['decision_ms_p99'] / 1e3)}",
        figures.size(p["peak_rss_mb"] * 2**20),
    )


def run_and_report(
    spec: BenchSpec, json_out: Path | Output | None, plot: Path | Output | None, out: Console
) -> dict[str, object]:
    """Run the bench with a progress bar, print the table, write JSON and plot."""
    with ProgressReporter("placement runs", len(spec.policies) * len(spec.seeds)) as progress:
        stats = run_bench(spec, progress.advance)
    report = bench_report(spec, stats)
    json_to = json_out if isinstance(json_out, Output) or json_out is None else Output(json_out)
    if json_to is None or not json_to.to_stdout:
        print_table(report, out)
    if json_to is not None:
        json_to.prepare()
        json_to.write_json(report)
        if not json_to.to_stdout:
            out.print(f"JSON written to {json_to}")
    plot_path = plot.path if isinstance(plot, Output) else plot
    if plot_path is not None:
        policies = report["policies"]
        assert isinstance(policies, dict)
        ours = {name: p["allocation_pct_mean"] for name, p in policies.items()}
        plot_allocation(
            plot_path, f"{spec.label} (simulated)", ours, published_allocation_curves(spec.label)
        )
        out.print(f"plot written to {plot_path}")
    return report


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the bench and report."""
    inputs = check_inputs(args)
    spec = BenchSpec(
        inputs.nodes_path,
        inputs.trace.path,
        inputs.trace.label,
        args.policies,
        args.seeds,
        inflate=args.inflate,
        jobs=args.jobs,
        shuffle_nodes=not args.list_node_order,
    )
    to_stdout = args.json_out is not None and args.json_out.to_stdout
    run_and_report(spec, args.json_out, args.plot, console(stderr=to_stdout))
    return 0
