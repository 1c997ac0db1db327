"""Where traces and published results live: built-in names and file paths.

Every openb pod list is embedded in the package (``default`` as CSV, the
others gzipped), with both node lists, so every command runs on a fresh clone.
An openb name (``gpushare40``, ``multigpu30``...) is looked up as
``openb_pod_list_<name>.csv`` (or ``.csv.gz``) in ``$ARKGPU_OPENB_DIR`` first,
then among the embedded files. Sources and licences: ``arkgpu/data/openb/SOURCE.md``.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

OPENB_DIR_ENV = "ARKGPU_OPENB_DIR"
"""Environment variable: directories (``os.pathsep``-separated) searched first."""

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


def openb_search_dirs() -> list[Path]:
    """Where openb names are looked up: ``$ARKGPU_OPENB_DIR`` entries, then the embedded traces."""
    extra = [Path(d) for d in os.environ.get(OPENB_DIR_ENV, "").split(os.pathsep) if d]
    return [*extra, package_data("openb")]


def embedded_openb_traces() -> list[str]:
    """Names of the embedded openb pod lists (``default``, ``gpushare20``...), sorted."""
    names = (
        p.name.removeprefix("openb_pod_list_").removesuffix(".gz").removesuffix(".csv")
        for p in package_data("openb").iterdir()
        if p.name.startswith("openb_pod_list_")
    )
    return sorted(names)


def resolve_pod_trace(spec: str, search_dirs: Sequence[Path] | None = None) -> TraceRef:
    """Turn ``default``, an openb name or a CSV path into a :class:`TraceRef`.

    ``search_dirs`` defaults to :func:`openb_search_dirs`.
    """
    if spec == "default":
        return TraceRef(
            "openb_pod_list_default", package_data("openb", "openb_pod_list_default.csv")
        )
    path = Path(spec)
    if path.suffix == ".csv" or path.name.endswith(".csv.gz"):
        if not path.is_file():
            raise FileNotFoundError(f"trace file not found: {path}")
        return TraceRef(path.name.removesuffix(".gz").removesuffix(".csv"), path)
    name = spec if spec.startswith("openb_pod_list_") else f"openb_pod_list_{spec}"
    dirs = openb_search_dirs() if search_dirs is None else list(search_dirs)
    for directory in dirs:
        for candidate in (directory / f"{name}.csv", directory / f"{name}.csv.gz"):
            if candidate.is_file():
                return TraceRef(name, candidate)
    looked = ", ".join(str(d) for d in dirs) or "no directory"
    raise FileNotFoundError(
        f"unknown trace {spec!r}: no {name}.csv(.gz) in {looked}"
        f" (embedded: {', '.join(embedded_openb_traces())})"
    )


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
