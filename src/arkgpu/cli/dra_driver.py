"""``arkgpu dra-driver``: the DRA driver (GPUs as devices with consumable capacity)."""

from __future__ import annotations

import argparse
from typing import Any

from arkgpu.cli.options import config_option


def register(subparsers: Any) -> None:
    """Add ``dra-driver run``."""
    parser = subparsers.add_parser(
        "dra-driver", help="the DRA driver: publish this node's GPUs as a ResourceSlice"
    )
    sub = parser.add_subparsers(dest="dra_driver_command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run", help="publish this node's GPUs (shareable, memory and cores) and keep them current"
    )
    config_option(run, "driver's", "docs/k8s/DRA.md")
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Load the configuration and run the driver until SIGTERM."""
    from arkgpu.k8s.dra.config import load_config  # noqa: PLC0415 (not at start-up)
    from arkgpu.k8s.dra.serving import serve  # noqa: PLC0415

    return serve(load_config(args.config))
