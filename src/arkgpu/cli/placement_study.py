"""``arkgpu placement study``: every openb trace, its policies, the LP bound and clairvoyant."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from arkgpu.bench.placement_study import OPENB_TRACES, StudySpec, plot_study, run_study
from arkgpu.bench.progress import ProgressReporter
from arkgpu.cli import figures
from arkgpu.cli.options import (
    ArgType,
    CliError,
    input_file,
    jobs_option,
    name_list,
    output_file,
    plot_option,
    reading,
    seed_list,
    seeds_option,
)
from arkgpu.cli.placement_inputs import check_traces, policy_arg, policy_names
from arkgpu.traces.catalog import default_node_list
from arkgpu.traces.openb import load_nodes

optional_seeds = ArgType(
    lambda text: () if not text.strip() else seed_list(text), ("5-1", "-5", "abc"), "seeds"
)
"""An argparse type: a seed list, or '' for none."""
optional_policies = name_list(policy_names, empty=True, noun="policies")
"""An argparse type: a policy list, or '' for none."""


def register_study(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``study`` to the ``placement`` group."""
    study = sub.add_parser("study", help="every openb trace: policies, LP bound, clairvoyant")
    study.add_argument(
        "--traces",
        metavar="NAMES",
        default=",".join(OPENB_TRACES),
        help="comma list of openb names or CSV paths (default: every openb trace)",
    )
    study.add_argument(
        "--nodes",
        metavar="CSV",
        type=input_file,
        default=None,
        help="node list CSV (default: the embedded openb GPU nodes)",
    )
    policy_arg(study, "--policies", "arkgpu,fgd", "policies run on every seed")
    seeds_option(study, "42-51")
    study.add_argument(
        "--baselines",
        metavar="NAMES",
        type=optional_policies,
        default=optional_policies("bestfit,packing,clustering,dotprod,random"),
        help="policies run on the baseline seeds, '' for none "
        "(default: bestfit,packing,clustering,dotprod,random)",
    )
    for flag, default, what in (
        ("--baseline-seeds", "42-43", "seeds of the baselines"),
        ("--clairvoyant-seeds", "42", "seeds of the LP bound and clairvoyant packing"),
    ):
        study.add_argument(
            flag,
            metavar="SEEDS",
            type=optional_seeds,
            default=optional_seeds(default),
            help=f"{what}: N, N-M or N,M,..., '' for none (default: {default})",
        )
    jobs_option(study, 1)
    study.add_argument(
        "--json",
        dest="json_out",
        metavar="PATH",
        type=output_file,
        required=True,
        help="write the study as JSON to PATH, rewritten after every task (required; "
        "a file, not '-')",
    )
    plot_option(study, "each trace's policies beside the LP bound")
    study.set_defaults(handler=cmd_study)


def cmd_study(args: argparse.Namespace) -> int:
    """Run the per-trace study, rewriting the JSON after every task."""
    if args.json_out.to_stdout:
        raise CliError("--json: the study rewrites its JSON after every task; give a file")
    names = [t.strip() for t in args.traces.split(",") if t.strip()]
    if not names:
        raise CliError("--traces: expected at least one trace name")
    nodes_path = args.nodes or default_node_list()
    with reading("--nodes", nodes_path):
        load_nodes(nodes_path)
    spec = StudySpec(
        nodes_path=nodes_path,
        traces=check_traces(names),
        policies=args.policies,
        seeds=args.seeds,
        baselines=args.baselines,
        baseline_seeds=args.baseline_seeds if args.baselines else (),
        clairvoyant_seeds=args.clairvoyant_seeds,
        jobs=args.jobs,
    )
    out = Console(width=120, highlight=False)

    with ProgressReporter("study tasks", len(spec.tasks())) as progress:

        def update(report: dict[str, Any]) -> None:
            args.json_out.write_json(report)
            progress.advance(f"{report['tasks_done']}/{report['tasks_total']}, JSON rewritten")

        report = run_study(spec, update)
    if args.plot is not None:
        plot_study(args.plot.path, report)
    for t in report["traces"]:
        ours = t["policies"].get("arkgpu", {}).get("mean_at_100")
        fgd = t["policies"].get("fgd", {}).get("mean_at_100")
        out.print(
            f"{t['trace']}: unallocated GPU % at 100% arrived (lower is better; n/a: not run): "
            f"arkgpu {_pct(ours)}, fgd {_pct(fgd)}, LP bound "
            f"{_pct(t.get('lp_bound_unallocated_pct'))}, target {_pct(t.get('target_at_100'))}"
        )
    return 0


def _pct(value: float | None) -> str:
    return figures.NA if value is None else f"{value:.2f}%"
