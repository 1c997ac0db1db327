"""Entry point of the ``arkgpu`` command.

Each command group lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``handler`` to a function taking the
parsed namespace and returning an exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from arkgpu import __version__

#: Modules under ``arkgpu.cli`` that add command groups, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "placement",
    "colocate",
    "profiles",
    "predictor",
    "limiter",
)


class CliError(Exception):
    """A user error that the command line reports in one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    """Build the full parser with every command group registered."""
    parser = argparse.ArgumentParser(
        prog="arkgpu",
        description="ArkGPU: share NVIDIA GPUs between latency-critical and best-effort work.",
    )
    parser.add_argument("--version", action="version", version=f"arkgpu {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = import_module(f"arkgpu.cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen command and return its exit status."""
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (CliError, ValueError, FileNotFoundError) as exc:
        print(f"arkgpu: error: {exc}", file=sys.stderr)
        return 2
