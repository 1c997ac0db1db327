"""Loaders of the openb node and pod lists (Alibaba GPU cluster trace v2023).

Node lists have ``sn,cpu_milli,memory_mib,gpu,model``. Pod lists have
``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
creation_time,deletion_time,scheduled_time``; the ``multigpu*`` files keep only
the first five columns. Every row is checked; a bad one raises
:class:`TraceFormatError` naming the file, the line and the field. No row is
dropped silently.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path

from arkgpu.model.gpus import known_gpu_models
from arkgpu.model.resources import MILLI_PER_GPU, Node, Pod

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL_COLUMNS = ("gpu_spec", "qos", "creation_time", "deletion_time")


class TraceFormatError(ValueError):
    """A trace file that does not follow its format; the message names file, line and field."""

    def __init__(self, path: Path, line: int, field: str, problem: str) -> None:
        super().__init__(f"{path}:{line}: field {field!r}: {problem}")
        self.path, self.line, self.field = path, line, field


def csv_rows(path: Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, row) after checking the header has every required column.

    A ``.gz`` file is read through gzip.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for column in required:
            if column not in header:
                raise TraceFormatError(path, 1, column, "missing column in header")
        for row in reader:
            if None in row or any(row.get(c) is None for c in header):
                raise TraceFormatError(path, reader.line_num, "*", "wrong number of fields")
            yield reader.line_num, row


def _int(
    path: Path, line: int, row: dict[str, str], field: str, *, default: int | None = None
) -> int:
    """Parse a non-negative integer field (``1.0``-style integral floats are accepted)."""
    text = (row.get(field) or "").strip()
    if not text and default is not None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(path, line, field, f"not a number: {text!r}") from None
    if value != int(value):
        raise TraceFormatError(path, line, field, f"not an integer: {text!r}")
    if value < 0:
        raise TraceFormatError(path, line, field, f"negative value: {text!r}")
    return int(value)


def _models(path: Path, line: int, field: str, text: str) -> frozenset[str]:
    """Parse a ``|``-separated GPU model list, checking each name."""
    text = text.strip()
    if not text or text.lower() == "nan":
        return frozenset()
    names = frozenset(n.strip() for n in text.split("|"))
    unknown = sorted(names - known_gpu_models())
    if unknown:
        raise TraceFormatError(path, line, field, f"unknown GPU model(s) {unknown}")
    return names


def load_nodes(path: str | Path) -> list[Node]:
    """Read a node list; raise :class:`TraceFormatError` on a bad row."""
    path = Path(path)
    nodes = []
    for line, row in csv_rows(path, NODE_COLUMNS):
        gpus = _int(path, line, row, "gpu")
        model = row["model"].strip()
        if gpus and not _models(path, line, "model", model):
            raise TraceFormatError(path, line, "model", "a node with GPUs needs a GPU model")
        nodes.append(
            Node(
                name=row["sn"].strip(),
                cpu_milli=_int(path, line, row, "cpu_milli"),
                memory_mib=_int(path, line, row, "memory_mib"),
                num_gpu=gpus,
                gpu_model=model if gpus else "",
            )
        )
    if not nodes:
        raise TraceFormatError(path, 2, "*", "no nodes in file")
    return nodes


def _pod(path: Path, line: int, row: dict[str, str]) -> Pod:
    num_gpu = _int(path, line, row, "num_gpu")
    gpu_milli = _int(path, line, row, "gpu_milli")
    if gpu_milli > MILLI_PER_GPU:
        raise TraceFormatError(path, line, "gpu_milli", f"{gpu_milli} outside 0..1000")
    if num_gpu > 1 and gpu_milli != MILLI_PER_GPU:
        raise TraceFormatError(path, line, "gpu_milli", "a multi-GPU pod must take whole GPUs")
    if num_gpu == 0 and gpu_milli != 0:
        raise TraceFormatError(path, line, "gpu_milli", "a pod without GPU asks for a share")
    if num_gpu > 0 and gpu_milli == 0:
        raise TraceFormatError(path, line, "gpu_milli", "a GPU pod asks for no share")
    return Pod(
        name=row["name"].strip(),
        cpu_milli=_int(path, line, row, "cpu_milli"),
        memory_mib=_int(path, line, row, "memory_mib"),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_spec=_models(path, line, "gpu_spec", row.get("gpu_spec") or ""),
        qos=(row.get("qos") or "").strip(),
        creation_time=_int(path, line, row, "creation_time", default=-1),
        deletion_time=_int(path, line, row, "deletion_time", default=-1),
    )


def load_pods(path: str | Path) -> list[Pod]:
    """Read a pod list; raise :class:`TraceFormatError` on a bad row."""
    path = Path(path)
    pods = [_pod(path, line, row) for line, row in csv_rows(path, POD_COLUMNS)]
    if not pods:
        raise TraceFormatError(path, 2, "*", "no pods in file")
    return pods
