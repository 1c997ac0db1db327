"""Converters from published profile files to ArkGPU's canonical format.

Each converter reads the source's own files (as kept in the repository's ``data/profiles``)
and returns canonical records; errors name the file, line and field.

* ``igniter`` (icloud-ecnu/igniter, V100, TensorRT, MPS): ``*_solo_mps.csv`` gives
  solo records (share = MPS active-thread % / 100); ``*_pair_interference.csv``
  gives pair records.
* ``parvagpu`` (MunQ-Lee/ParvaGPU_SC24, A100-80GB, MIG x MPS): ``prof_data_<model>.csv``;
  share = GPCs / 7. Only rows with one MPS process in the instance are solo
  measurements; rows with 2+ processes of the same model are left out (they are
  neither solo nor a two-workload pair), and so are rows of zeros (not measured,
  out of memory). The ``Latency`` column is in seconds rounded to 1 ms, too
  coarse for 5 ms batches; with one closed-loop process latency is batch /
  throughput, which the converter checks against the rounded column (within
  0.6 ms) and writes in ms with full precision.
  :func:`import_parvagpu_mps` reads the rows with 2+ processes on the whole GPU
  (7 GPCs) as MPS records, per process, checked the same way.
* ``migprofiler`` (HuaizhengZhang/MIGProfiler, A100-80GB, MIG): ``cv_cv_infer.csv``
  and ``nlp_nlp_infer.csv``; share = GPCs / 7 from the ``<n>g.<mem>gb`` profile
  name. NLP models are named ``<model>-seq<length>`` since the sequence length
  changes the work per request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.traces.profiles import (
    MpsRecord,
    PairRecord,
    ProfileFormatError,
    SoloRecord,
    _Row,
    read_rows,
)

MIG_GPCS = 7
"""GPCs of a whole A100 (MIG share = instance GPCs / 7)."""
IGNITER_GPU = REFERENCE_GPU
A100_GPU = "A100-80GB"
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Imported:
    """What one conversion produced."""

    solo: list[SoloRecord]
    """Solo records."""
    pairs: list[PairRecord]
    """Pair records (only iGniter has any)."""


def _igniter_solo(row: _Row) -> SoloRecord:
    return SoloRecord(
        gpu=IGNITER_GPU,
        model=row.text("model"),
        batch=row.integer("batch"),
        share=row.number("mps_thread_pct", high=100.0) / 100.0,
        latency_ms=row.number("latency_ms"),
        throughput=row.number("throughput_per_s"),
        l2_util_pct=row.optional("l2cache_pct", high=100.0),
        dram_util_pct=row.optional("dram_pct", high=100.0),
    )


def _igniter_pair(row: _Row) -> PairRecord:
    return PairRecord(
        gpu=IGNITER_GPU,
        model_a=row.text("model_a"),
        batch_a=row.integer("batch_a"),
        share_a=row.number("mps_pct_a", high=100.0) / 100.0,
        model_b=row.text("model_b"),
        batch_b=row.integer("batch_b"),
        share_b=row.number("mps_pct_b", high=100.0) / 100.0,
        latency_a_ms=row.number("latency_a_ms"),
        latency_b_ms=row.number("latency_b_ms"),
        std_a_ms=row.optional("std_a_ms"),
        std_b_ms=row.optional("std_b_ms"),
    )


IGNITER_SOLO_COLUMNS = ("model", "batch", "mps_thread_pct", "latency_ms", "throughput_per_s")
IGNITER_PAIR_COLUMNS = ("model_a", "model_b", "batch_a", "batch_b", "mps_pct_a", "mps_pct_b")


def _files(source: Path, pattern: str) -> list[Path]:
    if not source.exists():
        raise FileNotFoundError(f"no profile source at {source}")
    files = sorted(source.glob(pattern)) if source.is_dir() else [source]
    if not files:
        raise FileNotFoundError(f"no file matching {pattern} in {source}")
    return files


def import_igniter(source: Path | str) -> Imported:
    """Convert iGniter's solo and pair CSV files (a directory, or one file of either kind)."""
    src = Path(source)
    solo: list[SoloRecord] = []
    pairs: list[PairRecord] = []
    for file in _files(src, "*.csv"):
        if "pair" in file.name:
            pairs.extend(_igniter_pair(r) for r in read_rows(file, IGNITER_PAIR_COLUMNS))
        else:
            solo.extend(_igniter_solo(r) for r in read_rows(file, IGNITER_SOLO_COLUMNS))
    return Imported(solo, pairs)


PARVA_COLUMNS = ("Mig instance", "Batch size", "Workload Number", "Throughput", "Latency")


PARVA_ROUNDING_MS = 0.6
"""Largest accepted gap between ParvaGPU's rounded latency and batch / throughput, ms."""


def _parva_measured(row: _Row) -> tuple[int, int, float, float] | None:
    """``(GPCs, batch, latency_ms, throughput)`` of a ParvaGPU row; None for a row of zeros."""
    if row.text("Throughput") in ("0", "0.0") and row.text("Latency") in ("0", "0.0"):
        return None
    gpcs = row.integer("Mig instance")
    if gpcs > MIG_GPCS:
        raise row.error("Mig instance", f"{gpcs} GPCs exceeds the A100's {MIG_GPCS}")
    batch = row.integer("Batch size")
    throughput = row.number("Throughput")
    latency_ms = 1000.0 * batch / throughput
    rounded_ms = row.number("Latency") * 1000.0
    if abs(latency_ms - rounded_ms) > PARVA_ROUNDING_MS:
        problem = f"{rounded_ms:g} ms disagrees with batch / throughput = {latency_ms:.3f} ms"
        raise row.error("Latency", problem)
    return gpcs, batch, latency_ms, throughput


def _parva_row(model: str, row: _Row) -> SoloRecord | None:
    if row.integer("Workload Number") != 1 or (measured := _parva_measured(row)) is None:
        return None
    gpcs, batch, latency_ms, throughput = measured
    return SoloRecord(A100_GPU, model, batch, gpcs / MIG_GPCS, latency_ms, throughput)


def _parva_records(source: Path | str, convert: Callable[[str, _Row], R | None]) -> list[R]:
    """``convert(model, row)`` over every row of ParvaGPU's ``prof_data_<model>.csv``
    files (a directory or one file), the rows it keeps."""
    records: list[R] = []
    for file in _files(Path(source), "prof_data_*.csv"):
        model = file.stem.removeprefix("prof_data_")
        for row in read_rows(file, PARVA_COLUMNS):
            record = convert(model, row)
            if record is not None:
                records.append(record)
    return records


def import_parvagpu(source: Path | str) -> Imported:
    """Convert ParvaGPU's ``prof_data_<model>.csv`` files (a directory or one file)."""
    return Imported(_parva_records(source, _parva_row), [])


def _parva_mps_row(model: str, row: _Row) -> MpsRecord | None:
    processes = row.integer("Workload Number")
    if processes < 2 or (measured := _parva_measured(row)) is None:
        return None
    gpcs, batch, latency_ms, throughput = measured
    if gpcs != MIG_GPCS:
        return None
    return MpsRecord(A100_GPU, model, batch, processes, latency_ms, throughput)


def import_parvagpu_mps(source: Path | str) -> list[MpsRecord]:
    """ParvaGPU's rows of 2+ identical MPS processes on the whole GPU (7 GPCs), per process."""
    return _parva_records(source, _parva_mps_row)


MIG_PROFILE = re.compile(r"^(\d)g\.\d+gb$")
MIGPROFILER_FILES = ("cv_cv_infer.csv", "nlp_nlp_infer.csv")
MIGPROFILER_COLUMNS = ("model_name", "batch_size", "latency", "throughput", "mig_profile")


def _mig_share(row: _Row) -> float:
    name = row.text("mig_profile")
    match = MIG_PROFILE.match(name)
    if match is None:
        raise row.error("mig_profile", f"{name!r} is not a MIG profile like '3g.40gb'")
    gpcs = int(match.group(1))
    if not 1 <= gpcs <= MIG_GPCS:
        raise row.error("mig_profile", f"{gpcs} GPCs is outside 1..{MIG_GPCS}")
    return gpcs / MIG_GPCS


def _migprofiler_row(row: _Row) -> SoloRecord:
    model = row.text("model_name")
    if "seq_length" in row.values:
        model = f"{model}-seq{row.integer('seq_length')}"
    return SoloRecord(
        gpu=A100_GPU,
        model=model,
        batch=row.integer("batch_size"),
        share=_mig_share(row),
        latency_ms=row.number("latency"),
        throughput=row.number("throughput"),
    )


def import_migprofiler(source: Path | str) -> Imported:
    """Convert MIGProfiler's inference CSV files (a directory holding them, or one file)."""
    src = Path(source)
    if src.is_dir():
        files = [src / name for name in MIGPROFILER_FILES if (src / name).exists()]
        if not files:
            raise FileNotFoundError(f"none of {', '.join(MIGPROFILER_FILES)} in {src}")
    else:
        files = _files(src, "*.csv")
    solo = [_migprofiler_row(r) for f in files for r in read_rows(f, MIGPROFILER_COLUMNS)]
    return Imported(solo, [])


IMPORTERS: dict[str, Callable[[Path | str], Imported]] = {
    "igniter": import_igniter,
    "parvagpu": import_parvagpu,
    "migprofiler": import_migprofiler,
}
"""Converters by source name, as ``arkgpu profiles import --from`` spells them."""


def import_profiles(kind: str, source: Path | str) -> Imported:
    """Convert ``source`` with the converter called ``kind``."""
    try:
        importer = IMPORTERS[kind]
    except KeyError:
        raise ValueError(
            f"unknown profile source {kind!r} (known: {', '.join(IMPORTERS)})"
        ) from None
    return importer(source)


__all__ = ["IMPORTERS", "Imported", "ProfileFormatError", "import_profiles"]


def load_igniter_l2_slopes(path: Path | str) -> dict[str, float]:
    """iGniter's published per-model L2 contention slopes from ``Algorithm_config_v100.jsonl``.

    iGniter (``i-Gniter/Algorithm/igniter-algorithm.py``) stretches a model's GPU
    active time by ``1 + k_l2 * (co-runners' L2 %)`` with
    ``k_l2 = ((activetime_2 * frequency_2 / max_frequency) / activetime_1 - 1) / l2cache``,
    from the model profiled alone and beside a copy of itself. Returns ``{model: k_l2}``
    (per L2 %). Errors name the file, the line and the key.
    """
    entries: dict[str, dict[str, object]] = {}
    lines: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ProfileFormatError(path, number, "-", f"not JSON ({exc.msg})") from None
            for key, values in data.items():
                entries.setdefault(key, {}).update(values)
                lines.setdefault(key, number)
    max_frequency = _config_number(path, lines, entries, "hardware", "maxGPUfrequency")
    slopes = {}
    for model in sorted(k for k in entries if k != "hardware" and "l2cache" in entries[k]):
        active_1, active_2, frequency_2, l2 = (
            _config_number(path, lines, entries, model, key)
            for key in ("activetime_1", "activetime_2", "frequency_2", "l2cache")
        )
        slopes[model] = ((active_2 * frequency_2 / max_frequency) / active_1 - 1.0) / l2
    return slopes


def _config_number(
    path: Path | str,
    lines: dict[str, int],
    entries: dict[str, dict[str, object]],
    section: str,
    key: str,
) -> float:
    value = entries.get(section, {}).get(key)
    if not isinstance(value, int | float) or value <= 0:
        problem = f"{section}.{key} is {value!r}, not a positive number"
        raise ProfileFormatError(path, lines.get(section, 1), key, problem)
    return float(value)
