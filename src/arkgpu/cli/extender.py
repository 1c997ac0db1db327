"""``arkgpu extender``: the kube-scheduler extender (run it; benchmark it)."""

from __future__ import annotations

import argparse
from typing import Any

from arkgpu.cli.options import config_option, integer, json_option, name_list


def register(subparsers: Any) -> None:
    """Add ``extender run`` and ``extender bench``."""
    parser = subparsers.add_parser(
        "extender", help="the kube-scheduler extender: run it, benchmark it"
    )
    sub = parser.add_subparsers(dest="extender_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="serve filter, prioritize and bind for kube-scheduler")
    config_option(run, "extender's", "docs/k8s/EXTENDER.md")
    run.set_defaults(handler=run_command)
    bench = sub.add_parser(
        "bench", help="filter+prioritize latency and bind rate on a synthetic cluster, in process"
    )
    json_option(bench, "the figures")
    bench.add_argument(
        "--nodes",
        metavar="N",
        type=integer(1, 20_000),
        default=1000,
        help="nodes of the synthetic cluster, 1 to 20000 (default 1000)",
    )
    bench.add_argument(
        "--gpus-per-node",
        metavar="G",
        type=integer(1, 16),
        default=8,
        help="GPUs per node, 1 to 16 (default 8)",
    )
    bench.add_argument(
        "--pods",
        metavar="P",
        type=integer(10, 100_000),
        default=1000,
        help="pods scheduled per repetition, 10 to 100000 (default 1000)",
    )
    bench.add_argument(
        "--repeats",
        metavar="R",
        type=integer(1, 20),
        default=3,
        help="repetitions; figures are their medians, 1 to 20 (default 3)",
    )
    bench.add_argument(
        "--policy",
        metavar="NAME",
        type=name_list(_policies, noun="policies"),
        default=("arkgpu",),
        help="placement policy (default arkgpu)",
    )
    bench.add_argument(
        "--bind-threads",
        metavar="T",
        type=integer(1, 64),
        default=4,
        help="concurrent bind callers, 1 to 64 (default 4)",
    )
    bench.add_argument(
        "--seed",
        metavar="S",
        type=integer(0, 2**31),
        default=0,
        help="seed of the synthetic pods (default 0)",
    )
    bench.add_argument(
        "--relearn",
        metavar="WHERE",
        choices=("process", "thread", "inline"),
        default="process",
        help="where the arkgpu policy re-learns: process (a worker process, as the extender "
        "runs), thread (a worker thread) or inline (on the request path); default: process",
    )
    bench.add_argument(
        "--gc-full-every",
        metavar="N",
        type=integer(1, 1_000_000),
        default=1000,
        help="middle-generation collections between two full ones, as the extender's "
        "gc_full_every; 10 is Python's own (default 1000)",
    )
    bench.set_defaults(handler=bench_command)


def _policies() -> list[str]:
    from arkgpu.placement import POLICIES  # noqa: PLC0415 (numpy, not at start-up)

    return POLICIES.names()


def run_command(args: argparse.Namespace) -> int:
    """Load the configuration and serve until SIGTERM."""
    from arkgpu.k8s.extender.config import load_config  # noqa: PLC0415 (not at start-up)
    from arkgpu.k8s.extender.running import serve  # noqa: PLC0415

    return serve(load_config(args.config))


def bench_command(args: argparse.Namespace) -> int:
    """Run the benchmark; print its figures, write the JSON when asked."""
    from arkgpu.bench.progress import ProgressReporter  # noqa: PLC0415
    from arkgpu.k8s.extender.bench import BenchConfig, run_bench  # noqa: PLC0415

    config = BenchConfig(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        pods=args.pods,
        repeats=args.repeats,
        policy=args.policy[0],
        bind_threads=args.bind_threads,
        seed=args.seed,
        relearn=args.relearn,
        gc_full_every=args.gc_full_every,
    )
    with ProgressReporter("extender bench", config.repeats) as progress:
        report = run_bench(config, progress=progress.advance)
    if args.json_out is not None:
        args.json_out.write_json(report)
    if args.json_out is None or not args.json_out.to_stdout:
        for key, value in report.items():
            text = f"{value:.3f}" if isinstance(value, float) else str(value)
            print(f"{key:30s} {text}")
    return 0
