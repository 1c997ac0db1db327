"""``arkgpu node``: the node runtime (run it; the fake-GPU demo)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from arkgpu.cli.options import config_option, json_option, number, plot_option


def register(subparsers: Any) -> None:
    """Add ``node run``."""
    parser = subparsers.add_parser("node", help="the node runtime: run it, demo it on a fake GPU")
    sub = parser.add_subparsers(dest="node_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="drive this node's containers through the limiter")
    config_option(run, "runtime's", "docs/NODE.md")
    run.set_defaults(handler=run_command)
    demo = sub.add_parser("demo", help="the runtime, one LC and one BE workload on a fake GPU")
    json_option(demo, "the demo's figures")
    plot_option(demo, "shares, LC p99 against target and BE busy share over time")
    demo.add_argument(
        "--phase-s",
        metavar="S",
        type=number(1.0, 600.0),
        default=4.0,
        help="length of each load phase (high, low, high), seconds, 1 to 600 (default 4)",
    )
    demo.set_defaults(handler=demo_command)
    bench = sub.add_parser("bench", help="cost of a control tick (64 containers, 8 GPUs), CPU use")
    json_option(bench, "the figures")
    bench.add_argument(
        "--seconds",
        metavar="S",
        type=number(0.0, 3600.0, low_open=True),
        default=10.0,
        help="length of the CPU-use run at a 0.1 s period, seconds, 0 < S <= 3600 (default 10)",
    )
    bench.set_defaults(handler=bench_command)
    share = sub.add_parser(
        "contract-bench",
        help="an LC service, two HAMi pods and a BE job on a fake GPU: busy share per pod",
    )
    json_option(share, "the figures")
    share.add_argument(
        "--seconds",
        metavar="S",
        type=number(1.0, 3600.0),
        default=10.0,
        help="measured time after a 3 s warm-up, seconds, 1 to 3600 (default 10)",
    )
    share.set_defaults(handler=contract_bench_command)


def run_command(args: argparse.Namespace) -> int:
    """Load the configuration and run the runtime until SIGTERM."""
    from arkgpu.node.config import load_config  # noqa: PLC0415 (not at start-up)
    from arkgpu.node.serving import serve  # noqa: PLC0415

    return serve(load_config(args.config))


def demo_command(args: argparse.Namespace) -> int:
    """Run the demo; print its figures, write the JSON and the figure when asked."""
    from arkgpu.node.demo import DemoConfig, run_demo, summarise  # noqa: PLC0415
    from arkgpu.node.demo_plot import plot_demo  # noqa: PLC0415

    config = DemoConfig(phase_s=args.phase_s)
    run = run_demo(config, progress=lambda m: print(f"... {m}", file=sys.stderr, flush=True))
    report = summarise(config, run)
    if args.json_out is not None:
        args.json_out.write_json(report)
    if args.json_out is None or not args.json_out.to_stdout:
        _print(report)
    if args.plot is not None:
        plot_demo(config, run, args.plot.path)
    return 0


def _print(report: dict[str, Any]) -> None:
    for key, value in report.items():
        text = str(value)
        if isinstance(value, dict):
            text = ", ".join(f"{k} {v:.2f}" for k, v in value.items())
        elif isinstance(value, float):
            text = f"{value:.3f}"
        print(f"{key:28s} {text}")


def bench_command(args: argparse.Namespace) -> int:
    """Run the tick benchmark; print its figures, write the JSON when asked."""
    from arkgpu.node.bench import NodeBenchConfig, run_node_bench  # noqa: PLC0415

    report = run_node_bench(NodeBenchConfig(seconds=args.seconds))
    if args.json_out is not None:
        args.json_out.write_json(report)
    if args.json_out is None or not args.json_out.to_stdout:
        _print(report)
    return 0


def contract_bench_command(args: argparse.Namespace) -> int:
    """Run the contract bench; print its figures, write the JSON when asked."""
    from arkgpu.node.contract_bench import (  # noqa: PLC0415
        ContractBenchConfig,
        run_contract_bench,
    )

    report = run_contract_bench(ContractBenchConfig(measure_s=args.seconds))
    if args.json_out is not None:
        args.json_out.write_json(report)
    if args.json_out is None or not args.json_out.to_stdout:
        for name, pod in report["pods"].items():
            print(f"{name:8s} " + ", ".join(f"{k} {v}" for k, v in pod.items()))
        print(f"lc p99 {report['lc_p99_ms']} ms (target {report['lc_target_ms']} ms)")
    return 0
