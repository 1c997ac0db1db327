"""``arkgpu profiles``: convert published GPU profiles to the canonical format."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arkgpu.traces.profiles import (
    PAIR_SUFFIX,
    SOLO_SUFFIX,
    write_pair_profiles,
    write_solo_profiles,
)
from arkgpu.traces.profiles_importing import IMPORTERS, import_profiles


def register(subparsers: Any) -> None:
    """Add ``profiles import``."""
    parser = subparsers.add_parser("profiles", help="measured GPU profiles")
    commands = parser.add_subparsers(dest="profiles_command", required=True, metavar="COMMAND")
    imp = commands.add_parser(
        "import",
        help="convert iGniter, ParvaGPU or MIGProfiler files to canonical CSV",
        description="Writes OUT_solo.csv and, when the source has pairs, OUT_pairs.csv.",
    )
    imp.add_argument("--from", dest="kind", required=True, choices=sorted(IMPORTERS))
    imp.add_argument("source", type=Path, help="the source's directory or one of its files")
    imp.add_argument("out", help="output prefix: OUT_solo.csv, OUT_pairs.csv")
    imp.set_defaults(handler=run_import)


def run_import(args: argparse.Namespace) -> int:
    """Convert and write; print what was written."""
    imported = import_profiles(args.kind, args.source)
    solo_path = Path(f"{args.out}{SOLO_SUFFIX}")
    write_solo_profiles(solo_path, imported.solo)
    print(f"{solo_path}: {len(imported.solo)} solo records")
    if imported.pairs:
        pair_path = Path(f"{args.out}{PAIR_SUFFIX}")
        write_pair_profiles(pair_path, imported.pairs)
        print(f"{pair_path}: {len(imported.pairs)} pair records")
    return 0
