"""``arkgpu webhook``: the admission webhook (mutating and validating, HTTPS)."""

from __future__ import annotations

import argparse
from typing import Any

from arkgpu.cli.options import config_option


def register(subparsers: Any) -> None:
    """Add ``webhook run``."""
    parser = subparsers.add_parser(
        "webhook", help="admission webhook: GPU pods to ArkGPU's scheduler, bad ones refused"
    )
    sub = parser.add_subparsers(dest="webhook_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="serve /mutate and /validate over HTTPS until SIGTERM")
    config_option(run, "webhook's", "docs/k8s/WEBHOOK.md")
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Load the configuration and serve until SIGTERM."""
    from arkgpu.k8s.webhook.config import load_config  # noqa: PLC0415 (not at start-up)
    from arkgpu.k8s.webhook.serving import serve  # noqa: PLC0415

    return serve(load_config(args.config))
