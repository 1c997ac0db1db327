"""What a container's region says about its pod: ``<region>/pod.json``.

Whoever creates the region (the device plugin, the DRA driver, the demo)
writes ``pod.json`` beside ``limits`` and ``usage``; the runtime adopts a
container once all three are there. Fields: ``kind`` ("lc" or "be"), ``gpu``
(index on the node), ``model``, ``memory_mib`` (cap, optional), ``elastic`` (optional,
default true: false keeps the share the device plugin wrote), ``gpus`` (optional: every
GPU index of the container), ``namespace``, ``pod`` and ``container`` (optional: the
Kubernetes names of the container, shown in metrics and logs); for LC
``target_ms``, ``peak_rps``, ``max_batch``, ``max_queue_delay_ms``; for BE
``batch``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POD_FILE = "pod.json"
"""Name of the pod description in a region."""


@dataclass(frozen=True)
class PodSpec:
    """One container as the control loop sees it (fixed while it runs)."""

    name: str
    """Container name: its region folder's name."""
    kind: str
    """"lc" (latency-critical service) or "be" (best-effort job)."""
    gpu: int
    """GPU index on the node."""
    model: str
    """DNN model served or trained."""
    memory_mib: int | None = None
    """Memory cap, MiB; None: no cap."""
    target_ms: float = 0.0
    """LC: p99 latency target, ms."""
    peak_rps: float = 0.0
    """LC: request rate expected at the peak, requests/s."""
    max_batch: int = 8
    """LC: largest batch its batcher forms."""
    max_queue_delay_ms: float = 2.0
    """LC: its batcher's queue delay, ms."""
    batch: int = 32
    """BE: training batch."""
    gpus: tuple[int, ...] = ()
    """Every GPU index of the container (field ``gpus``, optional: just ``gpu``). The
    runtime adjusts the container on ``gpu``; on the others its share is held as it is."""
    elastic: bool = True
    """False for a pod that named no ArkGPU class (written for HAMi): its share is a cap
    it keeps, so the runtime never rewrites its limits and splits only the rest of its
    GPU among the others (field ``elastic``, default true)."""
    namespace: str = ""
    """The pod's namespace (field ``namespace``, optional)."""
    pod: str = ""
    """The pod's name (field ``pod``, optional)."""
    container: str = ""
    """The container's name in its pod (field ``container``, optional)."""

    @property
    def label(self) -> str:
        """How metrics and logs name the container: ``namespace/pod/container`` when
        ``pod.json`` says so, else its region folder's name."""
        if self.namespace and self.pod and self.container:
            return f"{self.namespace}/{self.pod}/{self.container}"
        return self.name

    @property
    def is_lc(self) -> bool:
        """Whether this is a latency-critical service."""
        return self.kind == "lc"


def _need(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"{where}: field {key}: missing or of the wrong type ({value!r})")
    return value


def parse_pod(name: str, raw: object, where: str) -> PodSpec:
    """The spec of container ``name`` from a parsed ``pod.json`` (ValueError naming the field)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a JSON object")
    kind = _need(raw, "kind", str, where)
    if kind not in ("lc", "be"):
        raise ValueError(f"{where}: field kind: expected 'lc' or 'be', got {kind!r}")
    memory = raw.get("memory_mib")
    if memory is not None:
        memory = _need(raw, "memory_mib", int, where)
    gpus = raw.get("gpus", [])
    if not isinstance(gpus, list) or not all(
        isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus
    ):
        raise ValueError(f"{where}: field gpus: expected a list of GPU indices, got {gpus!r}")
    elastic = raw.get("elastic", True)
    if not isinstance(elastic, bool):
        raise ValueError(f"{where}: field elastic: expected true or false, got {elastic!r}")
    common: dict[str, Any] = {
        **_names(raw, where),
        "gpu": _need(raw, "gpu", int, where),
        "model": _need(raw, "model", str, where),
        "memory_mib": memory,
        "elastic": elastic,
        "gpus": tuple(gpus),
    }
    if kind == "be":
        return PodSpec(name, kind, batch=int(raw.get("batch", 32)), **common)
    return PodSpec(
        name,
        kind,
        target_ms=float(_need(raw, "target_ms", (int, float), where)),
        peak_rps=float(_need(raw, "peak_rps", (int, float), where)),
        max_batch=int(raw.get("max_batch", 8)),
        max_queue_delay_ms=float(raw.get("max_queue_delay_ms", 2.0)),
        **common,
    )


def _names(raw: dict[str, Any], where: str) -> dict[str, str]:
    """The optional ``namespace``, ``pod`` and ``container`` fields (strings)."""
    found = {}
    for key in ("namespace", "pod", "container"):
        value = raw.get(key, "")
        if not isinstance(value, str):
            raise ValueError(f"{where}: field {key}: expected a string, got {value!r}")
        found[key] = value
    return found


def read_pod(region: Path) -> PodSpec:
    """The spec in ``region/pod.json`` (OSError or ValueError when absent or malformed)."""
    path = region / POD_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    return parse_pod(region.name, raw, str(path))


def write_pod(region: Path, spec: PodSpec) -> None:
    """Write ``spec`` as ``region/pod.json`` (the creator's side; atomic)."""
    body = {k: v for k, v in spec.__dict__.items() if k != "name"}
    tmp = region / f".{POD_FILE}.tmp"
    tmp.write_text(json.dumps(body), encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(region / POD_FILE)
