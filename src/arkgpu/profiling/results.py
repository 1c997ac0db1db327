"""A profiling run's output folder: one file per finished point, and the profiles made of them.

Layout of ``DIR``:

- ``points/<key>.json``: one finished point each, written atomically (a
  temporary file renamed into place), so an interrupted run leaves only whole
  points; a rerun skips the points found here.
- ``<gpu>_solo.csv``, ``<gpu>_pairs.csv``: the canonical profiles
  (docs/PROFILES.md), rewritten atomically from every point after each one.
- ``<gpu>_solo_stats.csv``, ``<gpu>_pairs_stats.csv``: the same points with
  median, p99, standard deviation, mean, batches and NVML utilisation (names
  the profile loaders do not read).
- ``run.json``: GPU (NVML name, driver, profile name), backend and timing; a
  rerun must find the same GPU, driver and backend.
- ``SOURCE.md``: where the profiles come from, for a reader.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from arkgpu.profiling.nvml import GpuIdentity
from arkgpu.profiling.plans import Point, SoloPoint, safe
from arkgpu.profiling.stats import LatencyStats
from arkgpu.traces.profiles import (
    PairRecord,
    SoloRecord,
    write_pair_profiles,
    write_solo_profiles,
)

POINTS = "points"
RUN_FILE = "run.json"


@dataclass(frozen=True, slots=True)
class Measured:
    """One workload's result at a point."""

    model: str
    """The profile's model name."""
    batch: int
    share: float
    latency: LatencyStats
    gpu_util_pct: float | None = None
    """NVML's kernel-time % over the measuring window (the whole GPU)."""
    mem_util_pct: float | None = None
    """NVML's memory-time % over the measuring window (the whole GPU)."""


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write`` on a temporary file beside ``path``, flush it to disk, rename it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _text_to(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _measured_doc(m: Measured) -> dict[str, Any]:
    doc = asdict(m)
    doc["latency"] = m.latency.to_dict()
    return doc


def _measured(doc: dict[str, Any]) -> Measured:
    util = (doc.get("gpu_util_pct"), doc.get("mem_util_pct"))
    return Measured(
        model=str(doc["model"]),
        batch=int(doc["batch"]),
        share=float(doc["share"]),
        latency=LatencyStats.from_dict(doc["latency"]),
        gpu_util_pct=None if util[0] is None else float(util[0]),
        mem_util_pct=None if util[1] is None else float(util[1]),
    )


class RunFolder:
    """The output folder of one profiling run (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        (path / POINTS).mkdir(parents=True, exist_ok=True)

    def point_file(self, point: Point) -> Path:
        """Where ``point``'s result lies."""
        return self.path / POINTS / f"{point.key}.json"

    def done(self, point: Point) -> bool:
        """Whether ``point`` has a whole result already."""
        return self._read(self.point_file(point)) is not None

    @staticmethod
    def _read(path: Path) -> list[Measured] | None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            return [_measured(d) for d in doc["measured"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, point: Point, measured: list[Measured], extra: dict[str, Any]) -> None:
        """Write ``point``'s result atomically."""
        kind = "solo" if isinstance(point, SoloPoint) else "pair"
        doc = {"kind": kind, "measured": [_measured_doc(m) for m in measured], **extra}
        text = json.dumps(doc, indent=1) + "\n"
        atomic_write(self.point_file(point), lambda p: _text_to(p, text))

    def results(self) -> tuple[list[Measured], list[tuple[Measured, Measured]]]:
        """Every whole result in the folder: solo ones, and pairs (a, b)."""
        solo: list[Measured] = []
        pairs: list[tuple[Measured, Measured]] = []
        for file in sorted((self.path / POINTS).glob("*.json")):
            measured = self._read(file)
            if measured is None:
                continue
            if len(measured) == 1:
                solo.append(measured[0])
            elif len(measured) == 2:
                pairs.append((measured[0], measured[1]))
        return solo, pairs

    def check_run(self, doc: dict[str, Any]) -> None:
        """Record the run's GPU and backend, or check them against a previous run's."""
        path = self.path / RUN_FILE
        if path.exists():
            try:
                before = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                raise ValueError(f"{path}: not JSON; remove it to start afresh") from None
            for field in ("gpu", "backend"):
                if before.get(field) != doc[field]:
                    raise ValueError(
                        f"--out {self.path}: holds a run with {field} {before.get(field)}, "
                        f"not {doc[field]}; choose another folder"
                    )
        text = json.dumps(doc, indent=1) + "\n"
        atomic_write(path, lambda p: _text_to(p, text))

    def write_profiles(self, identity: GpuIdentity, source: str) -> tuple[Path, Path]:
        """Rewrite the canonical profiles, their statistics and SOURCE.md; return the
        solo and pair files."""
        solo, pairs = self.results()
        stem = safe(identity.gpu).lower()
        solo_file = self.path / f"{stem}_solo.csv"
        pair_file = self.path / f"{stem}_pairs.csv"
        solo_rows = [solo_record(identity.gpu, m) for m in solo]
        pair_rows = [pair_record(identity.gpu, a, b) for a, b in pairs]
        atomic_write(solo_file, lambda p: write_solo_profiles(p, solo_rows))
        atomic_write(pair_file, lambda p: write_pair_profiles(p, pair_rows))
        self._write_stats(self.path / f"{stem}_solo_stats.csv", [[m] for m in solo])
        self._write_stats(self.path / f"{stem}_pairs_stats.csv", [[a, b] for a, b in pairs])
        text = source
        atomic_write(self.path / "SOURCE.md", lambda p: _text_to(p, text))
        return solo_file, pair_file

    def _write_stats(self, path: Path, rows: Iterable[list[Measured]]) -> None:
        header = ["workload", "model", "batch", "share", "median_ms", "p99_ms", "std_ms"]
        header += ["mean_ms", "batches", "gpu_util_pct", "mem_util_pct", "point"]

        def write(p: Path) -> None:
            with open(p, "w", newline="", encoding="utf-8") as handle:
                out = csv.writer(handle, lineterminator="\n")
                out.writerow(header)
                for number, row in enumerate(rows):
                    for side, m in zip("ab", row, strict=False):
                        out.writerow(_stats_row(side if len(row) > 1 else "solo", m, number))

        atomic_write(path, write)


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _stats_row(workload: str, m: Measured, number: int) -> list[str]:
    s = m.latency
    return [
        workload,
        m.model,
        str(m.batch),
        f"{m.share:g}",
        *(_cell(v) for v in (s.median_ms, s.p99_ms, s.std_ms, s.mean_ms)),
        str(s.batches),
        _cell(m.gpu_util_pct),
        _cell(m.mem_util_pct),
        str(number),
    ]


def solo_record(gpu: str, m: Measured) -> SoloRecord:
    """A solo profile row: the median latency; DRAM from NVML's memory figure when > 0;
    no L2 (see :mod:`arkgpu.profiling.nvml`)."""
    dram = m.mem_util_pct if m.mem_util_pct else None
    return SoloRecord(
        gpu=gpu,
        model=m.model,
        batch=m.batch,
        share=m.share,
        latency_ms=m.latency.median_ms,
        throughput=m.latency.throughput_per_s(m.batch),
        l2_util_pct=None,
        dram_util_pct=None if dram is None else min(100.0, dram),
    )


def pair_record(gpu: str, a: Measured, b: Measured) -> PairRecord:
    """A pair profile row: each side's median latency and standard deviation."""
    return PairRecord(
        gpu=gpu,
        model_a=a.model,
        batch_a=a.batch,
        share_a=a.share,
        model_b=b.model,
        batch_b=b.batch,
        share_b=b.share,
        latency_a_ms=a.latency.median_ms,
        latency_b_ms=b.latency.median_ms,
        std_a_ms=a.latency.std_ms,
        std_b_ms=b.latency.std_ms,
    )
