"""The command line's one convention for options.

Every value a user types is checked while the arguments are parsed, before any work
starts (:mod:`arkgpu.cli.argtypes`, :mod:`arkgpu.cli.paths`); a bad one stops the
command with one line that names the option and what it accepts. Output options mean
the same in every command: ``--json [PATH]`` (``-`` or no PATH: standard output) and
``--plot PATH``; their folders are created before the command runs.

Standard library only: ``arkgpu --help`` stays fast.
"""

from __future__ import annotations

import argparse

from arkgpu.cli.argtypes import (
    ArgType,
    CliError,
    grid_size,
    integer,
    name_list,
    number,
    number_list,
    seed_list,
)
from arkgpu.cli.paths import (
    STDOUT,
    Output,
    OutputDir,
    file_output,
    input_dir,
    input_file,
    input_path,
    output_dir,
    output_file,
    prepare_outputs,
    reading,
)

__all__ = [
    "STDOUT",
    "ArgType",
    "CliError",
    "Output",
    "OutputDir",
    "config_option",
    "file_output",
    "grid_size",
    "input_dir",
    "input_file",
    "input_path",
    "integer",
    "jobs_option",
    "json_option",
    "name_list",
    "number",
    "number_list",
    "output_dir",
    "output_file",
    "plot_option",
    "prepare_outputs",
    "reading",
    "seed_list",
    "seed_option",
    "seeds_option",
]


def _escaped(text: str) -> str:
    """``text`` safe in argparse help, which %-formats it."""
    return text.replace("%", "%%")


def json_option(parser: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    """Add ``--json [PATH]``: write ``what`` as JSON to PATH (bare or ``-``: standard output)."""
    what = _escaped(what)
    parser.add_argument(
        "--json",
        dest="json_out",
        metavar="PATH",
        type=output_file,
        nargs=None if required else "?",
        const=None if required else Output(None),
        required=required,
        help=f"write {what} as JSON to PATH ('-' or no PATH: standard output, instead of "
        "the table); default: no JSON",
    )


def config_option(parser: argparse.ArgumentParser, whose: str, fields: str) -> None:
    """Add the required ``--config FILE`` of a daemon: ``whose`` TOML configuration, its
    fields documented in ``fields``."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=input_file,
        required=True,
        help=f"the {_escaped(whose)} TOML configuration (fields: {fields})",
    )


def plot_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--plot PATH``: draw ``what`` as a PNG at PATH (folders created)."""
    what = _escaped(what)
    parser.add_argument(
        "--plot",
        metavar="PATH",
        type=file_output,
        help=f"draw {what} as a PNG file at PATH (its folder is created); default: no figure",
    )


def jobs_option(parser: argparse.ArgumentParser, default: int | None) -> None:
    """Add ``--jobs N``: worker processes."""
    shown = "one per CPU" if default is None else str(default)
    parser.add_argument(
        "--jobs",
        metavar="N",
        type=integer(1, 256),
        default=default,
        help=f"worker processes, 1 to 256 (default: {shown})",
    )


def seeds_option(parser: argparse.ArgumentParser, default: str, flag: str = "--seeds") -> None:
    """Add a seed list option (N, N-M or N,M,...)."""
    parser.add_argument(
        flag,
        metavar="SEEDS",
        type=seed_list,
        default=seed_list(default),
        help=f"random seeds: N, N-M or N,M,... (integers >= 0; default: {default})",
    )


def seed_option(parser: argparse.ArgumentParser, default: int, what: str = "random seed") -> None:
    """Add ``--seed N`` (an integer >= 0)."""
    parser.add_argument(
        "--seed",
        metavar="N",
        type=integer(0),
        default=default,
        help=f"{what}, an integer >= 0 (default: {default})",
    )
