"""``arkgpu profiles``: convert published GPU profiles to the canonical format."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arkgpu.cli.options import ArgType, file_output, input_path, reading
from arkgpu.traces.profiles import (
    PAIR_SUFFIX,
    SOLO_SUFFIX,
    write_pair_profiles,
    write_solo_profiles,
)
from arkgpu.traces.profiles_importing import IMPORTERS, import_profiles


def _parse_prefix(text: str) -> str:
    for suffix in (SOLO_SUFFIX, PAIR_SUFFIX):
        file_output(f"{text}{suffix}")
    return text


out_prefix = ArgType(_parse_prefix, ("{file}/x",), "prefix")
"""An argparse type: an output prefix whose files can be written."""


def register(subparsers: Any) -> None:
    """Add ``profiles import``."""
    parser = subparsers.add_parser("profiles", help="measured GPU profiles")
    commands = parser.add_subparsers(dest="profiles_command", required=True, metavar="COMMAND")
    imp = commands.add_parser(
        "import",
        help="convert iGniter, ParvaGPU or MIGProfiler files to canonical CSV",
        description="Writes OUT_solo.csv and, when the source has pairs, OUT_pairs.csv.",
    )
    imp.add_argument(
        "--from",
        dest="kind",
        metavar="SOURCE_KIND",
        required=True,
        choices=sorted(IMPORTERS),
        help=f"whose format the source is in: one of {', '.join(sorted(IMPORTERS))} (required)",
    )
    imp.add_argument(
        "source", type=input_path, help="the source's folder or one of its files (required)"
    )
    imp.add_argument(
        "out",
        type=out_prefix,
        help="output prefix: writes OUT_solo.csv and OUT_pairs.csv (folders created)",
    )
    imp.set_defaults(handler=run_import)


def run_import(args: argparse.Namespace) -> int:
    """Convert and write; print what was written."""
    with reading(f"{args.kind} source", args.source):
        imported = import_profiles(args.kind, args.source)
    solo_path = Path(f"{args.out}{SOLO_SUFFIX}")
    solo_path.parent.mkdir(parents=True, exist_ok=True)
    write_solo_profiles(solo_path, imported.solo)
    print(f"{solo_path}: {len(imported.solo):,} solo records")
    if imported.pairs:
        pair_path = Path(f"{args.out}{PAIR_SUFFIX}")
        write_pair_profiles(pair_path, imported.pairs)
        print(f"{pair_path}: {len(imported.pairs):,} pair records")
    return 0
