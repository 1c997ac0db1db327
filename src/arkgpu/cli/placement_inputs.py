"""Options the ``placement`` commands share, and checking their inputs before any work."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arkgpu.cli.options import input_file, name_list, number, reading
from arkgpu.placement import POLICIES
from arkgpu.traces.catalog import TraceRef, default_node_list, openb_search_dirs, resolve_pod_trace
from arkgpu.traces.openb import load_nodes, load_pods

INFLATE_MAX = 10.0
"""Largest ``--inflate`` accepted: arrivals as a multiple of the cluster's GPU capacity."""


def policy_names() -> tuple[str, ...]:
    """Names of the registered placement policies."""
    return tuple(POLICIES.names())


policy_list = name_list(policy_names, noun="policies")
"""An argparse type: a comma list of policy names."""


def trace_args(parser: argparse.ArgumentParser, inflate: bool = True) -> None:
    """Add ``--trace``, ``--nodes`` and (by default) ``--inflate``."""
    parser.add_argument(
        "--trace",
        metavar="TRACE",
        default="default",
        help="pod list: 'default' (embedded), an openb name such as gpushare40, or a CSV path "
        "(default: default)",
    )
    parser.add_argument(
        "--nodes",
        metavar="CSV",
        type=input_file,
        default=None,
        help="node list CSV (default: the embedded openb GPU nodes)",
    )
    if inflate:
        parser.add_argument(
            "--inflate",
            metavar="X",
            type=number(0.0, INFLATE_MAX, low_open=True),
            default=1.3,
            help=f"pods arrive until their GPU demand is X times the capacity, 0 < X <= "
            f"{INFLATE_MAX:g} (default: 1.3)",
        )


def policy_arg(parser: argparse.ArgumentParser, flag: str, default: str | None, what: str) -> None:
    """Add a policy-list option (``--policy`` or ``--policies``)."""
    shown = f"default: {default}" if default is not None else "required"
    parser.add_argument(
        flag,
        metavar="NAMES",
        type=policy_list,
        default=None if default is None else policy_list(default),
        required=default is None,
        help=f"{what}: a comma list of {', '.join(policy_names())} ({shown})",
    )


@dataclass(frozen=True)
class Inputs:
    """The checked inputs of a placement command."""

    trace: TraceRef
    """The pod list."""
    nodes_path: Path
    """The node list."""


def resolve_trace(spec: str, option: str = "--trace") -> TraceRef:
    """Resolve ``spec`` and check that the file reads as a pod list."""
    with reading(option, spec):
        trace = resolve_pod_trace(spec, openb_search_dirs())
    with reading(option, trace.path):
        load_pods(trace.path)
    return trace


def check_inputs(args: argparse.Namespace) -> Inputs:
    """Resolve and read the trace and node list now, so a bad file fails before the work."""
    trace = resolve_trace(args.trace)
    nodes_path = args.nodes or default_node_list()
    with reading("--nodes", nodes_path):
        load_nodes(nodes_path)
    return Inputs(trace, nodes_path)


def check_traces(specs: Sequence[str]) -> tuple[TraceRef, ...]:
    """Resolve and read each of several traces."""
    return tuple(resolve_trace(spec, "--traces") for spec in specs)
