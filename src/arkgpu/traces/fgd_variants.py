"""FGD's own variants of the openb default trace, rebuilt from what differs.

Beside the embedded openb traces (``arkgpu/data/openb``), the FGD authors publish variants
of the default trace in the same repository (alibaba/clusterdata,
``cluster-trace-gpu-v2023/csv``), made to test policies on workloads they were
not designed on:

* ``openb_pod_list_gpuspecNN.csv``: the default pods, row for row, with a
  ``gpu_spec`` (the GPU models a pod may use) on about NN% of the GPU pods;
* ``openb_pod_list_cpuNNN.csv``: the default GPU pods in their order, with
  another set of CPU-only pods drawn from the default's (375 to 3,030 of
  them against the default's 1,088).

The package ships only the difference (``data/openb/fgd_variants``, see its
SOURCE.md): for a ``gpuspec`` file, ``name,num_gpu,gpu_milli,gpu_spec`` of
every pod with a ``gpu_spec`` (``num_gpu`` and ``gpu_milli`` are there to be
checked against the default trace); for a ``cpu`` file,
``row,cpu_milli,memory_mib,creation_time,deletion_time`` of every CPU-only pod,
``row`` being its 0-based position. The other positions hold the default
trace's GPU pods in order. Rows are renamed ``openb-pod-NNNN`` by position, as
in FGD's files. Columns that were not carried over (``qos``, ``pod_phase``,
``scheduled_time`` of the CPU-only pods) are left empty; no placement reads them.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from arkgpu.traces.catalog import package_data
from arkgpu.traces.openb import TraceFormatError, csv_rows

SPEC_COLUMNS = ("name", "num_gpu", "gpu_milli", "gpu_spec")
CPU_COLUMNS = ("row", "cpu_milli", "memory_mib", "creation_time", "deletion_time")
POD_FIELDS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)

Row = dict[str, str]


def variants_dir() -> Path:
    """Where the shipped differences live."""
    return package_data("openb", "fgd_variants")


def variant_names(directory: Path | None = None) -> list[str]:
    """Names of the shipped variants (``gpuspec10``, ``cpu250``...), sorted."""
    return sorted(
        p.name.removesuffix(".csv.gz") for p in (directory or variants_dir()).glob("*.csv.gz")
    )


def read_default(path: Path | None = None) -> list[Row]:
    """The default pod list as rows of text, every column kept."""
    source = path or package_data("openb", "openb_pod_list_default.csv")
    return [row for _, row in csv_rows(source, POD_FIELDS)]


def with_specs(default: Sequence[Row], delta: Path) -> list[Row]:
    """The default rows with the ``gpu_spec`` of a ``gpuspec`` difference file."""
    by_name = {row["name"]: i for i, row in enumerate(default)}
    rows = [dict(row, gpu_spec="") for row in default]
    seen: set[str] = set()
    for line, change in csv_rows(delta, SPEC_COLUMNS):
        name = change["name"]
        if name not in by_name:
            raise TraceFormatError(delta, line, "name", f"no pod {name!r} in the default trace")
        if name in seen:
            raise TraceFormatError(delta, line, "name", f"pod {name!r} given twice")
        seen.add(name)
        row = rows[by_name[name]]
        for field in ("num_gpu", "gpu_milli"):
            if change[field] != row[field]:
                raise TraceFormatError(
                    delta, line, field, f"{change[field]!r}, the default trace has {row[field]!r}"
                )
        if not change["gpu_spec"].strip():
            raise TraceFormatError(delta, line, "gpu_spec", "empty")
        row["gpu_spec"] = change["gpu_spec"]
    return rows


def _cpu_row(change: Row) -> Row:
    return {
        **dict.fromkeys(POD_FIELDS, ""),
        "cpu_milli": change["cpu_milli"],
        "memory_mib": change["memory_mib"],
        "num_gpu": "0",
        "gpu_milli": "0",
        "creation_time": change["creation_time"],
        "deletion_time": change["deletion_time"],
    }


def with_cpu_pods(default: Sequence[Row], delta: Path) -> list[Row]:
    """The default GPU pods, in order, around the CPU-only pods of a ``cpu`` difference file."""
    changes = list(csv_rows(delta, CPU_COLUMNS))
    gpu_rows = [row for row in default if row["num_gpu"].strip() not in ("", "0")]
    total = len(changes) + len(gpu_rows)
    placed: dict[int, Row] = {}
    for line, change in changes:
        text = change["row"].strip()
        if not (text.isascii() and text.isdigit()) or int(text) >= total:
            raise TraceFormatError(delta, line, "row", f"{text!r} is not a row in 0..{total - 1}")
        if int(text) in placed:
            raise TraceFormatError(delta, line, "row", f"row {text} given twice")
        placed[int(text)] = _cpu_row(change)
    gpu = iter(gpu_rows)
    rows = [placed[i] if i in placed else dict(next(gpu)) for i in range(total)]
    for i, row in enumerate(rows):
        row["name"] = f"openb-pod-{i:04d}"
    return rows


def rebuild(
    name: str, default: Sequence[Row] | None = None, directory: Path | None = None
) -> list[Row]:
    """The rows of FGD's ``openb_pod_list_<name>.csv``."""
    delta = (directory or variants_dir()) / f"{name}.csv.gz"
    if not delta.is_file():
        known = ", ".join(variant_names(directory)) or "none"
        raise FileNotFoundError(f"no FGD variant {name!r} (shipped: {known})")
    base = read_default() if default is None else default
    if name.startswith("gpuspec"):
        return with_specs(base, delta)
    return with_cpu_pods(base, delta)


def write_rows(rows: Sequence[Row], path: Path) -> None:
    """Write pod rows as an openb pod list, through a temporary file so no partial file is left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=POD_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    partial.replace(path)
