"""Reading the profile sets that ``arkgpu predictor fit|eval|calibrate`` take."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from arkgpu.cli.options import CliError, reading
from arkgpu.predictor import Predictor
from arkgpu.traces.profiles import (
    MpsRecord,
    PairRecord,
    SoloRecord,
    load_mps_profiles,
    load_pair_profiles,
    load_solo_profiles,
)


@dataclasses.dataclass
class Profiles:
    """What the --profiles options hold, together."""

    solo: list[SoloRecord]
    groups: list[PairRecord | MpsRecord]
    sources: list[str]


def _read_set(path: Path, no_mps: bool) -> Profiles:
    with reading("--profiles", path):
        solo = load_solo_profiles(path)
        groups: list[PairRecord | MpsRecord] = []
        if path.is_dir():
            groups += load_pair_profiles(path)
            if not no_mps:
                groups += load_mps_profiles(path)
    if not solo:
        raise CliError(f"--profiles {path}: no solo profile records")
    return Profiles(solo, groups, [str(path)])


def load_profiles(args: argparse.Namespace) -> Profiles:
    sets = [_read_set(path, args.no_mps) for path in args.profiles]
    solo = [r for one in sets for r in one.solo]
    groups = [g for one in sets for g in one.groups]
    where = ", ".join(str(p) for p in args.profiles)
    if args.gpu:
        gpus = sorted({r.gpu for r in solo})
        solo = [r for r in solo if r.gpu == args.gpu]
        groups = [g for g in groups if g.gpu == args.gpu]
        if not solo:
            raise CliError(
                f"--gpu {args.gpu}: no solo profile records of this GPU in {where} "
                f"(GPUs there: {', '.join(gpus)})"
            )
    if args.no_utilisation:
        solo = [dataclasses.replace(r, l2_util_pct=None, dram_util_pct=None) for r in solo]
    return Profiles(solo, groups, [str(p) for p in args.profiles])


def overlaps(paths: list[Path]) -> list[str]:
    """A note per (GPU, model) measured in more than one profile set: one curve fits both."""
    seen: dict[tuple[str, str], str] = {}
    notes = []
    for path in paths:
        for key in sorted({(r.gpu, r.model) for r in load_solo_profiles(path)}):
            if key in seen and seen[key] != str(path):
                notes.append(
                    f"note: {key[1]} on {key[0]} is in {seen[key]} and {path}: "
                    "one curve is fitted to both"
                )
            seen.setdefault(key, str(path))
    return notes


def fit_summary(profiles: Profiles, predictor: Predictor) -> list[str]:
    """One line per GPU model: DNN models fitted, pairs and MPS groups at level 2."""
    lines = []
    for gpu in predictor.gpus():
        pairs = sum(1 for g in profiles.groups if g.gpu == gpu and isinstance(g, PairRecord))
        mps = sum(1 for g in profiles.groups if g.gpu == gpu and isinstance(g, MpsRecord))
        models = len(predictor.models(gpu))
        lines.append(f"  {gpu}: {models} DNN models, {pairs} pairs and {mps} MPS groups at level 2")
    return lines
