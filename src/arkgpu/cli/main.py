"""Entry point of the ``arkgpu`` command.

Each command group lives in its own module with a ``register(subparsers)`` function
that adds its parser and sets ``handler`` to a function taking the parsed namespace and
returning an exit status. Only the group a command line names is imported, so that
``arkgpu --version`` and ``arkgpu --help`` import no numerical library.

Errors: bad input (a value, a file, a path) ends the command with one line,
``arkgpu: error: ...``, and exit status 2. A command that needs an optional package the
installation lacks says which extra to install, in one line, exit status 69
(:mod:`arkgpu.cli.extras`). Anything else is a bug: one line saying so, exit status 70,
and the traceback when ``ARKGPU_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import NoReturn

from arkgpu import __version__
from arkgpu.cli.extras import check_plot, missing_extra_message
from arkgpu.cli.options import CliError, prepare_outputs

__all__ = ["GROUPS", "CliError", "build_parser", "main"]

GROUPS: dict[str, str] = {
    "demo": "run the main comparisons on the embedded data and write the results",
    "placement": "level-1 placement on the openb trace: run, bench, bounds, replay",
    "colocate": "co-location simulator (latency-critical + best-effort on shared GPUs)",
    "profiles": "measured GPU profiles: import published ones",
    "predictor": "the two-level performance predictor: fit, evaluate, show",
    "profile": "measure GPU profiles on this node's GPU, under the limiter",
    "limiter": "resource limiter: benchmark, inspect a container's region",
    "extender": "the kube-scheduler extender: run it, benchmark it",
    "node": "the node runtime: run it, demo it on a fake GPU",
    "workload": "test workloads on the fake GPU (LC and BE)",
    "webhook": "admission webhook: GPU pods to ArkGPU's scheduler, bad ones refused",
    "device-plugin": "the kubelet device plugin and node GPU inventory: run it",
    "dra-driver": "the DRA driver: publish this node's GPUs as a ResourceSlice",
}
"""Command groups, each a module ``arkgpu.cli.<name>`` (``-`` spelled ``_``), in help order."""

USAGE_ERROR = 2
"""Exit status of bad input (as argparse uses)."""
BUG = 70
"""Exit status of an unexpected error (EX_SOFTWARE)."""
MISSING_EXTRA = 69
"""Exit status of a command whose optional package is not installed (EX_UNAVAILABLE)."""
DEBUG_VARIABLE = "ARKGPU_DEBUG"
"""Set to 1 to see the traceback of an unexpected error."""


class UsageError(CliError):
    """A command line argparse refused."""


class Parser(argparse.ArgumentParser):
    """An argument parser that reports a bad command line in one line."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing the usage block and exiting."""
        command = self.prog.removeprefix("arkgpu").strip()
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} (see {self.prog} --help)")


def build_parser(groups: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser with ``groups`` registered in full (default: all); others by name only."""
    parser = Parser(
        prog="arkgpu",
        description="ArkGPU: share NVIDIA GPUs between latency-critical and best-effort work.",
        epilog=f"Bad input exits with status {USAGE_ERROR}; set {DEBUG_VARIABLE}=1 to see "
        "the traceback of an unexpected error.",
    )
    parser.add_argument("--version", action="version", version=f"arkgpu {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="GROUP")
    for name, summary in GROUPS.items():
        if groups is None or name in groups:
            import_module(f"arkgpu.cli.{name.replace('-', '_')}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def _named_group(argv: Sequence[str]) -> list[str]:
    """The group the command line names (its first word that is not an option)."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return [first] if first in GROUPS else []


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen command and return its exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(_named_group(words)).parse_args(words)
        handler: Callable[[argparse.Namespace], int] = args.handler
        prepare_outputs(args)
        check_plot(args)
        return handler(args)
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except Exception as exc:
        return _failed(exc)


def _failed(exc: Exception) -> int:
    """Report an exception that ended a command in one line; its exit status."""
    if _is_user_error(exc):
        _say(f"error: {_one_line(exc)}")
        return USAGE_ERROR
    missing = missing_extra_message(exc) if isinstance(exc, ModuleNotFoundError) else None
    if missing is not None:
        _say(f"error: {missing}")
        return MISSING_EXTRA
    if os.environ.get(DEBUG_VARIABLE) == "1":
        raise exc
    _say(
        f"internal error (a bug): {type(exc).__name__}: {_one_line(exc)}; "
        f"run with {DEBUG_VARIABLE}=1 for the traceback"
    )
    return BUG


def _is_user_error(exc: Exception) -> bool:
    """Bad input rather than a bug: our own errors, a bad value or file, an unknown name.

    A plain KeyError is a bug (a missing key in our own data); the project's lookups
    raise their own KeyError subclasses for a name the user gave.
    """
    from arkgpu.model.gpus import UnknownGpuModelError  # noqa: PLC0415 (not at start-up)

    return isinstance(exc, CliError | ValueError | OSError | UnknownGpuModelError)


def _one_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    return " ".join(text.split()) or type(exc).__name__


def _say(text: str) -> None:
    print(f"arkgpu: {text}", file=sys.stderr, flush=True)
