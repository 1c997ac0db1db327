"""Where traces and published results live: built-in names and file paths.

``default`` is the openb default pod list embedded in the package (with its
GPU node list), so every command runs on a fresh clone. Other openb names
(``gpushare40``, ``multigpu30``...) are looked up as
``openb_pod_list_<name>.csv`` in the directories given, for example the
project's ``../shared/data/openb``.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

#: FGD's published policy labels by our policy names.
FGD_LABELS = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


def package_data(*parts: str) -> Path:
    """Path of a file shipped under ``arkgpu/data``."""
    return Path(str(files("arkgpu").joinpath("data", *parts)))


def default_node_list() -> Path:
    """The embedded openb GPU node list (1,213 nodes, 6,212 GPUs)."""
    return package_data("openb", "openb_node_list_gpu_node.csv")


def all_node_list() -> Path:
    """The embedded openb node list with CPU-only nodes (1,523 nodes, 6,212 GPUs)."""
    return package_data("openb", "openb_node_list_all_node.csv")


@dataclass(frozen=True, slots=True)
class TraceRef:
    """A resolved pod trace: its label (as FGD names workloads) and its file."""

    label: str
    path: Path


def resolve_pod_trace(spec: str, search_dirs: Sequence[Path] = ()) -> TraceRef:
    """Turn ``default``, an openb name or a CSV path into a :class:`TraceRef`."""
    if spec == "default":
        return TraceRef(
            "openb_pod_list_default", package_data("openb", "openb_pod_list_default.csv")
        )
    path = Path(spec)
    if path.suffix == ".csv":
        if not path.is_file():
            raise FileNotFoundError(f"trace file not found: {path}")
        return TraceRef(path.stem, path)
    name = spec if spec.startswith("openb_pod_list_") else f"openb_pod_list_{spec}"
    for directory in search_dirs:
        candidate = Path(directory) / f"{name}.csv"
        if candidate.is_file():
            return TraceRef(name, candidate)
    looked = ", ".join(str(d) for d in search_dirs) or "no directory"
    raise FileNotFoundError(f"unknown trace {spec!r}: not built in, no {name}.csv in {looked}")


@dataclass(frozen=True, slots=True)
class Published:
    """The FGD authors' published unallocated GPU % at 100% arrived, mean and sd over seeds."""

    mean: float
    sd: float
    seeds: int


def published_unallocated(label: str) -> dict[str, Published]:
    """Published figures for a workload label, keyed by our policy names (empty if none)."""
    ours = {v: k for k, v in FGD_LABELS.items()}
    with package_data("fgd", "unallocated_at_100pct.csv").open(newline="") as f:
        return {
            ours[row["policy"]]: Published(
                float(row["mean_unallocated_gpu_pct"]), float(row["sd"]), int(row["n_seeds"])
            )
            for row in csv.DictReader(f)
            if row["workload"] == label and row["policy"] in ours
        }


def published_allocation_curves(label: str) -> dict[str, list[float]]:
    """Published mean allocation % at 0..130% arrived for a workload, by our policy names."""
    ours = {v: k for k, v in FGD_LABELS.items()}
    with package_data("fgd", "allocation_curves_mean.csv").open(newline="") as f:
        return {
            ours[row["policy"]]: [float(row[str(x)]) for x in range(131)]
            for row in csv.DictReader(f)
            if row["workload"] == label and row["policy"] in ours
        }
