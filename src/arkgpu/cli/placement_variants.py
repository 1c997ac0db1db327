"""``arkgpu placement variants``: write FGD's gpu_spec and CPU-only variants of the openb trace."""

from __future__ import annotations

import argparse
import shutil

from arkgpu.cli.options import name_list, output_dir
from arkgpu.traces.catalog import all_node_list
from arkgpu.traces.fgd_variants import read_default, rebuild, variant_names, write_rows


def register_variants(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``variants`` to the ``placement`` group."""
    parser = sub.add_parser(
        "variants", help="write FGD's gpuspec/cpu variants of the default trace to a folder"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=output_dir,
        required=True,
        help="folder to write the CSVs to, created if missing (required)",
    )
    parser.add_argument(
        "--names",
        metavar="NAMES",
        type=name_list(lambda: tuple(variant_names()), all_word="all"),
        default="all",
        help="'all', or a comma list such as gpuspec33,cpu250 (default: all)",
    )
    parser.set_defaults(handler=cmd_variants)


def cmd_variants(args: argparse.Namespace) -> int:
    """Rebuild each variant from the embedded default trace; also copy the all-node list."""
    default = read_default()
    for name in args.names:
        rows = rebuild(name, default)
        path = args.out.path / f"openb_pod_list_{name}.csv"
        write_rows(rows, path)
        print(f"{path}: {len(rows):,} pods")
    nodes = args.out.path / all_node_list().name
    shutil.copyfile(all_node_list(), nodes)
    print(f"{nodes}: the 1,523 openb nodes (CPU-only nodes included); pass it as --nodes")
    return 0
