"""Measured GPU inference profiles in ArkGPU's canonical CSV format.

Two kinds of file (the format is documented in ``docs/PROFILES.md``):

* solo files (``*_solo.csv``), one row per (GPU, DNN model, batch, share)
  measured with the model alone on its share of the GPU::

      gpu,model,batch,share,latency_ms,throughput_per_s,l2_util_pct,dram_util_pct

* pair files (``*_pairs.csv``), one row per co-located pair of workloads::

      gpu,model_a,batch_a,share_a,model_b,batch_b,share_b,latency_a_ms,latency_b_ms,std_a_ms,std_b_ms

* MPS files (``*_mps.csv``), one row per (GPU, DNN model, batch, n) measured with
  ``n`` identical processes of the model under MPS defaults (no active-thread
  limit) on the whole GPU; latency and throughput are per process::

      gpu,model,batch,processes,latency_ms,throughput_per_s

``share`` is the fraction of the GPU's compute in (0, 1]: an MPS active-thread
percentage divided by 100, or a MIG instance's GPCs divided by 7. Optional
fields are empty. Every loading error names the file, the line and the field.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import astuple, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

SOLO_COLUMNS: tuple[str, ...] = (
    "gpu",
    "model",
    "batch",
    "share",
    "latency_ms",
    "throughput_per_s",
    "l2_util_pct",
    "dram_util_pct",
)
PAIR_COLUMNS: tuple[str, ...] = (
    "gpu",
    "model_a",
    "batch_a",
    "share_a",
    "model_b",
    "batch_b",
    "share_b",
    "latency_a_ms",
    "latency_b_ms",
    "std_a_ms",
    "std_b_ms",
)
MPS_COLUMNS: tuple[str, ...] = (
    "gpu",
    "model",
    "batch",
    "processes",
    "latency_ms",
    "throughput_per_s",
)
SOLO_SUFFIX = "_solo.csv"
PAIR_SUFFIX = "_pairs.csv"
MPS_SUFFIX = "_mps.csv"


class ProfileFormatError(ValueError):
    """A profile file that does not follow the format; the message names file, line and field."""

    def __init__(self, path: Path | str, line: int, field: str, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        super().__init__(f"{path}:{line}: field {field!r}: {problem}")


@dataclass(frozen=True, slots=True)
class SoloRecord:
    """One model measured alone on a share of one GPU."""

    gpu: str
    """GPU model name as in :mod:`arkgpu.model.gpus` (``V100``, ``A100-80GB``)."""
    model: str
    """DNN model name (``resnet50``)."""
    batch: int
    """Batch size in requests, >= 1."""
    share: float
    """Fraction of the GPU's compute, in (0, 1]."""
    latency_ms: float
    """Latency of one batch in ms, > 0."""
    throughput: float
    """Requests per second, > 0."""
    l2_util_pct: float | None = None
    """L2 cache utilisation in % of the whole GPU, when measured."""
    dram_util_pct: float | None = None
    """DRAM bandwidth utilisation in % of the whole GPU, when measured."""


@dataclass(frozen=True, slots=True)
class PairRecord:
    """Two workloads measured together on one GPU, each on its own share."""

    gpu: str
    """GPU model name."""
    model_a: str
    """DNN model of workload a."""
    batch_a: int
    """Batch size of workload a."""
    share_a: float
    """Compute share of workload a, in (0, 1]."""
    model_b: str
    """DNN model of workload b."""
    batch_b: int
    """Batch size of workload b."""
    share_b: float
    """Compute share of workload b, in (0, 1]."""
    latency_a_ms: float
    """Measured latency of a's batch in ms while b runs."""
    latency_b_ms: float
    """Measured latency of b's batch in ms while a runs."""
    std_a_ms: float | None = None
    """Standard deviation of a's latency in ms, when reported."""
    std_b_ms: float | None = None
    """Standard deviation of b's latency in ms, when reported."""


@dataclass(frozen=True, slots=True)
class MpsRecord:
    """``processes`` identical copies of one model sharing a whole GPU under MPS defaults."""

    gpu: str
    """GPU model name."""
    model: str
    """DNN model name."""
    batch: int
    """Batch size in requests of every process, >= 1."""
    processes: int
    """Number of identical MPS processes running at once, >= 2."""
    latency_ms: float
    """Latency of one batch of one process in ms, > 0."""
    throughput: float
    """Requests per second of one process, > 0."""


class _Row:
    """One CSV row with typed field access that raises :class:`ProfileFormatError`."""

    def __init__(self, path: Path | str, line: int, values: dict[str, str]) -> None:
        self.path, self.line, self.values = path, line, values

    def error(self, field: str, problem: str) -> ProfileFormatError:
        return ProfileFormatError(self.path, self.line, field, problem)

    def text(self, field: str) -> str:
        value = (self.values.get(field) or "").strip()
        if not value:
            raise self.error(field, "is empty")
        return value

    def number(self, field: str, low: float = 0.0, high: float = float("inf")) -> float:
        raw = self.text(field)
        try:
            value = float(raw)
        except ValueError:
            raise self.error(field, f"{raw!r} is not a number") from None
        if not low < value <= high:
            raise self.error(field, f"{value} is outside ({low}, {high}]")
        return value

    def integer(self, field: str) -> int:
        raw = self.text(field)
        try:
            value = int(raw)
        except ValueError:
            raise self.error(field, f"{raw!r} is not an integer") from None
        if value < 1:
            raise self.error(field, f"{value} is below 1")
        return value

    def optional(self, field: str, high: float = float("inf")) -> float | None:
        if not (self.values.get(field) or "").strip():
            return None
        raw = self.text(field)
        try:
            value = float(raw)
        except ValueError:
            raise self.error(field, f"{raw!r} is not a number") from None
        if not 0.0 <= value <= high:
            raise self.error(field, f"{value} is outside [0, {high}]")
        return value


def read_rows(path: Path | str, required: Sequence[str]) -> Iterator[_Row]:
    """Yield the rows of CSV ``path`` after checking that its header has ``required``."""
    with open(path, newline="", encoding="utf-8-sig") as handle:  # tolerate a BOM
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        for name in required:
            if name not in header:
                raise ProfileFormatError(path, 1, name, "column missing from the header")
        for values in reader:
            if None in values:
                raise ProfileFormatError(path, reader.line_num, "-", "more values than columns")
            yield _Row(path, reader.line_num, values)


def _solo(row: _Row) -> SoloRecord:
    return SoloRecord(
        gpu=row.text("gpu"),
        model=row.text("model"),
        batch=row.integer("batch"),
        share=row.number("share", high=1.0),
        latency_ms=row.number("latency_ms"),
        throughput=row.number("throughput_per_s"),
        l2_util_pct=row.optional("l2_util_pct", high=100.0),
        dram_util_pct=row.optional("dram_util_pct", high=100.0),
    )


def _pair(row: _Row) -> PairRecord:
    return PairRecord(
        gpu=row.text("gpu"),
        model_a=row.text("model_a"),
        batch_a=row.integer("batch_a"),
        share_a=row.number("share_a", high=1.0),
        model_b=row.text("model_b"),
        batch_b=row.integer("batch_b"),
        share_b=row.number("share_b", high=1.0),
        latency_a_ms=row.number("latency_a_ms"),
        latency_b_ms=row.number("latency_b_ms"),
        std_a_ms=row.optional("std_a_ms"),
        std_b_ms=row.optional("std_b_ms"),
    )


def _mps(row: _Row) -> MpsRecord:
    processes = row.integer("processes")
    if processes < 2:
        raise row.error("processes", f"{processes} is below 2 (one process is a solo row)")
    return MpsRecord(
        gpu=row.text("gpu"),
        model=row.text("model"),
        batch=row.integer("batch"),
        processes=processes,
        latency_ms=row.number("latency_ms"),
        throughput=row.number("throughput_per_s"),
    )


T = TypeVar("T")


def _load(
    path: Path | str, suffix: str, columns: Sequence[str], parse: Callable[[_Row], T]
) -> list[T]:
    target = Path(path)
    files = sorted(target.glob(f"*{suffix}")) if target.is_dir() else [target]
    if not target.exists():
        raise FileNotFoundError(f"no profile file or directory at {target}")
    records: list[T] = []
    for file in files:
        records.extend(parse(row) for row in read_rows(file, columns))
    return records


def load_solo_profiles(path: Path | str) -> list[SoloRecord]:
    """Load solo records from a canonical file, or from every ``*_solo.csv`` in a directory."""
    return _load(path, SOLO_SUFFIX, SOLO_COLUMNS, _solo)


def load_pair_profiles(path: Path | str) -> list[PairRecord]:
    """Load pair records from a canonical file, or from every ``*_pairs.csv`` in a directory."""
    return _load(path, PAIR_SUFFIX, PAIR_COLUMNS, _pair)


def load_mps_profiles(path: Path | str) -> list[MpsRecord]:
    """Load MPS records from a canonical file, or from every ``*_mps.csv`` in a directory."""
    return _load(path, MPS_SUFFIX, MPS_COLUMNS, _mps)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def _write(path: Path | str, columns: Sequence[str], records: Iterable[Any]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for record in records:
            writer.writerow([_cell(v) for v in astuple(record)])


def write_solo_profiles(path: Path | str, records: Iterable[SoloRecord]) -> None:
    """Write solo records to ``path`` in the canonical format."""
    _write(path, SOLO_COLUMNS, records)


def write_pair_profiles(path: Path | str, records: Iterable[PairRecord]) -> None:
    """Write pair records to ``path`` in the canonical format."""
    _write(path, PAIR_COLUMNS, records)


def write_mps_profiles(path: Path | str, records: Iterable[MpsRecord]) -> None:
    """Write MPS records to ``path`` in the canonical format."""
    _write(path, MPS_COLUMNS, records)


def default_profile_dir() -> Path:
    """The directory of canonical profiles shipped inside the package (see its SOURCE.md)."""
    return Path(str(resources.files("arkgpu") / "data" / "profiles"))
