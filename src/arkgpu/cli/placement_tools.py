"""``arkgpu placement bound|defrag|replay|study``: limits, re-packing and replay of placement."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from arkgpu.bench.placement import parse_seeds
from arkgpu.bench.placement_study import (
    OPENB_TRACES,
    StudySpec,
    arrived_until,
    plot_study,
    run_study,
)
from arkgpu.placement import POLICIES
from arkgpu.placement.bounds import lp_bound
from arkgpu.placement.bounds_offline import clairvoyant
from arkgpu.traces.catalog import TraceRef, default_node_list, resolve_pod_trace
from arkgpu.traces.openb import load_nodes, load_pods



def _trace_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="default", help="pod CSV, 'default', or an openb name")
    parser.add_argument("--nodes", type=Path, default=None, help="node CSV (default: openb GPUs)")
    parser.add_argument("--inflate", type=float, default=1.3, help="arrivals as x capacity")


def _resolve(spec: str, nodes: Path | None) -> tuple[TraceRef, Path]:
    from arkgpu.cli.placement import trace_dirs  # noqa: PLC0415 (the module imports this one)

    return resolve_pod_trace(spec, trace_dirs()), nodes or default_node_list()


def register_tools(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bound``, ``defrag``, ``replay`` and ``study`` to the ``placement`` group."""
    bound = sub.add_parser("bound", help="LP lower bound and clairvoyant packing at 100%% arrived")
    _trace_args(bound)
    bound.add_argument("--seed", type=int, default=42)
    bound.add_argument("--json", action="store_true", help="print the result as JSON")
    bound.set_defaults(handler=cmd_bound)
    study = sub.add_parser("study", help="every openb trace: policies, LP bound, clairvoyant")
    study.add_argument("--traces", default=",".join(OPENB_TRACES))
    study.add_argument("--nodes", type=Path, default=None)
    study.add_argument("--policies", default="arkgpu,fgd")
    study.add_argument("--seeds", default="42-51")
    study.add_argument("--baselines", default="bestfit,packing,clustering,dotprod,random")
    study.add_argument("--baseline-seeds", default="42-43")
    study.add_argument("--clairvoyant-seeds", default="42")
    study.add_argument("--jobs", type=int, default=1)
    study.add_argument("--json", type=Path, required=True, dest="json_out")
    study.add_argument("--plot", type=Path, default=None)
    study.set_defaults(handler=cmd_study)


def bound_document(trace: TraceRef, nodes_path: Path, seed: int, inflate: float) -> dict[str, Any]:
    """The ``bound`` command's result."""
    nodes, pods = load_nodes(nodes_path), load_pods(trace.path)
    arrived = arrived_until(pods, sum(n.num_gpu for n in nodes) * 1000, seed, inflate)
    bound = lp_bound(nodes, arrived)
    packed = clairvoyant(nodes, arrived)
    return {
        "trace": trace.label,
        "seed": seed,
        "pods_arrived_at_100": len(arrived),
        "lp_bound_unallocated_pct": bound.unallocated_pct,
        "lp_rounds": bound.rounds,
        "lp_patterns": bound.patterns,
        "clairvoyant_unallocated_pct": packed.unallocated_pct,
        "clairvoyant_method": packed.method,
    }


def cmd_bound(args: argparse.Namespace) -> int:
    """Print the LP bound and the clairvoyant figure for one seed."""
    trace, nodes_path = _resolve(args.trace, args.nodes)
    doc = bound_document(trace, nodes_path, args.seed, args.inflate)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"{doc['trace']} seed {args.seed}: LP bound {doc['lp_bound_unallocated_pct']:.2f}% "
        f"unallocated at 100% arrived; clairvoyant packing {doc['clairvoyant_unallocated_pct']:.2f}% "
        f"({doc['clairvoyant_method']})"
    )
    return 0


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if name not in POLICIES.names():
            raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES.names())})")
    return names


def cmd_study(args: argparse.Namespace) -> int:
    """Run the per-trace study, rewriting the JSON after every task."""
    traces = tuple(_resolve(t.strip(), None)[0] for t in args.traces.split(",") if t.strip())
    spec = StudySpec(
        nodes_path=args.nodes or default_node_list(),
        traces=traces,
        policies=_names(args.policies),
        seeds=parse_seeds(args.seeds),
        baselines=_names(args.baselines),
        baseline_seeds=parse_seeds(args.baseline_seeds) if args.baselines else (),
        clairvoyant_seeds=parse_seeds(args.clairvoyant_seeds) if args.clairvoyant_seeds else (),
        jobs=args.jobs,
    )
    console = Console(width=120)

    def update(report: dict[str, Any]) -> None:
        args.json_out.write_text(json.dumps(report, indent=2))
        console.print(f"{report['tasks_done']}/{report['tasks_total']} tasks done")

    report = run_study(spec, update)
    if args.plot is not None:
        plot_study(args.plot, report)
    for t in report["traces"]:
        ours = t["policies"].get("arkgpu", {}).get("mean_at_100")
        console.print(
            f"{t['trace']}: arkgpu {ours}, fgd {t['policies'].get('fgd', {}).get('mean_at_100')}, "
            f"LP {t.get('lp_bound_unallocated_pct')}, target {t.get('target_at_100')}"
        )
    return 0
