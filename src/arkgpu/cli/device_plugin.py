"""``arkgpu device-plugin``: the kubelet device plugin and the node's GPU inventory."""

from __future__ import annotations

import argparse
from typing import Any

from arkgpu.cli.options import config_option


def register(subparsers: Any) -> None:
    """Add ``device-plugin run``."""
    parser = subparsers.add_parser(
        "device-plugin", help="the kubelet device plugin and node GPU inventory: run it"
    )
    sub = parser.add_subparsers(dest="device_plugin_command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run", help="serve nvidia.com/gpu to the kubelet and publish this node's GPUs"
    )
    config_option(run, "plugin's", "docs/k8s/DEVICE-PLUGIN.md")
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Load the configuration and run the plugin until SIGTERM."""
    from arkgpu.k8s.deviceplugin.config import load_config  # noqa: PLC0415 (not at start-up)
    from arkgpu.k8s.deviceplugin.serving import serve  # noqa: PLC0415

    return serve(load_config(args.config))
