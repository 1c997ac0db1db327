"""``arkgpu placement anatomy``: where a policy's unallocated GPUs are, beside the LP bound."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from arkgpu.bench.placement_anatomy import AnatomySpec, run_anatomy, summarise
from arkgpu.bench.progress import ProgressReporter
from arkgpu.cli.options import jobs_option, json_option, seeds_option
from arkgpu.cli.placement_inputs import check_inputs, policy_arg, trace_args
from arkgpu.cli.tables import Column, console, label, make_table


def register_anatomy(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``anatomy`` to the ``placement`` group."""
    parser = sub.add_parser(
        "anatomy", help="unallocated GPUs at 100%% taken apart: free, share mix, packing"
    )
    trace_args(parser)
    policy_arg(parser, "--policies", "arkgpu,fgd", "policies")
    seeds_option(parser, "42")
    jobs_option(parser, 1)
    json_option(parser, "every run and the means")
    parser.set_defaults(handler=cmd_anatomy)


def cmd_anatomy(args: argparse.Namespace) -> int:
    """Run each policy to 100% arrived per seed and print the parts of what is unallocated."""
    inputs = check_inputs(args)
    spec = AnatomySpec(
        nodes_path=inputs.nodes_path,
        pods_path=inputs.trace.path,
        policies=args.policies,
        seeds=args.seeds,
        inflate=args.inflate,
        jobs=args.jobs,
    )
    with ProgressReporter("anatomy runs", len(spec.policies) * len(spec.seeds)) as progress:
        results = run_anatomy(spec, progress.advance)
    summary = summarise(results)
    if args.json_out is not None:
        report = {
            "trace": inputs.trace.label,
            "simulated": True,
            "runs": [asdict(r) for r in results],
            "mean": summary,
        }
        args.json_out.write_json(report)
        if args.json_out.to_stdout:
            return 0
    _print_summary(inputs.trace.label, summary)
    return 0


def _print_summary(trace: str, summary: dict[str, Any]) -> None:
    table = make_table(
        f"{trace} (simulated): % of GPU capacity at 100% arrived, mean over seeds",
        (
            label("policy"),
            Column("unallocated", "lower"),
            Column("free GPUs"),
            Column("mix-waste"),
            Column("packing-excess", "lower"),
            Column("LP bound"),
        ),
        notes=("unallocated = free GPUs + mix-waste + packing-excess",),
    )
    keys = ("unallocated_pct", "free_gpu_pct", "mix_waste_pct", "packing_excess_pct")
    for policy, doc in summary.items():
        table.add_row(policy, *(f"{doc[k]:.3f}" for k in (*keys, "lp_bound_pct")))
    out = console()
    out.print(table)
    for policy, doc in summary.items():
        failed = ", ".join(f"{k}: {v:.1f}" for k, v in doc["failed_mean"].items())
        left = ", ".join(f"{k}: {v:.1f}" for k, v in doc["lp_left_out_mean"].items())
        out.print(f"{policy}: pods failed by GPU milli per pod: {failed or 'none'}")
        out.print(f"{policy}: pods the LP bound leaves out: {left or 'none'}")
