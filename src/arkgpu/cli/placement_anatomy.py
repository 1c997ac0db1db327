"""``arkgpu placement anatomy``: where a policy's unallocated GPUs are, beside the LP bound."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from arkgpu.bench.placement import parse_seeds
from arkgpu.bench.placement_anatomy import AnatomySpec, run_anatomy, summarise
from arkgpu.cli.placement_tools import policy_names, trace_args
from arkgpu.traces.catalog import default_node_list, resolve_pod_trace


def register_anatomy(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``anatomy`` to the ``placement`` group."""
    parser = sub.add_parser(
        "anatomy", help="unallocated GPUs at 100%% taken apart: free, share mix, packing"
    )
    trace_args(parser)
    parser.add_argument("--policies", default="arkgpu,fgd", help="a policy or a list")
    parser.add_argument("--seeds", default="42", help="42-51 or 42,43")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--json", action="store_true", help="print per-seed results as JSON")
    parser.set_defaults(handler=cmd_anatomy)


def cmd_anatomy(args: argparse.Namespace) -> int:
    """Run each policy to 100% arrived per seed and print the parts of what is unallocated."""
    from arkgpu.cli.placement import trace_dirs  # noqa: PLC0415 (the module imports this one)

    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    trace = resolve_pod_trace(args.trace, trace_dirs())
    spec = AnatomySpec(
        nodes_path=args.nodes or default_node_list(),
        pods_path=trace.path,
        policies=policy_names(args.policies),
        seeds=parse_seeds(args.seeds),
        inflate=args.inflate,
        jobs=args.jobs,
    )
    results = run_anatomy(spec)
    summary = summarise(results)
    if args.json:
        report = {
            "trace": trace.label,
            "simulated": True,
            "runs": [asdict(r) for r in results],
            "mean": summary,
        }
        print(json.dumps(report, indent=2))
        return 0
    print(f"{trace.label} (simulated), % of GPU capacity at 100% arrived, mean over seeds")
    print("policy      unalloc   free  mix-waste  packing-excess  LP bound")
    for policy, doc in summary.items():
        print(
            f"{policy:<11} {doc['unallocated_pct']:7.3f} {doc['free_gpu_pct']:6.3f} "
            f"{doc['mix_waste_pct']:10.3f} {doc['packing_excess_pct']:15.3f} "
            f"{doc['lp_bound_pct']:9.3f}"
        )
        failed = ", ".join(f"{k}: {v:.1f}" for k, v in doc["failed_mean"].items())
        left = ", ".join(f"{k}: {v:.1f}" for k, v in doc["lp_left_out_mean"].items())
        print(f"  failed by milli per GPU: {failed or '-'}")
        print(f"  LP leaves out:           {left or '-'}")
    return 0
