"""Co-location scenarios: GPUs, LC services and BE jobs, read from TOML files.

A scenario file has one ``[scenario]`` table, any number of ``[[lc]]`` tables
(latency-critical inference services) and ``[[be]]`` tables (best-effort
training jobs); docs/COLOCATION.md lists every field. Errors name the file
and the field (``paper.toml: lc[2].target_ms: must be > 0``).
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from arkgpu.model.gpus import REFERENCE_GPU


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names file and field."""


@dataclass(frozen=True)
class LcSpec:
    """A latency-critical inference service."""

    name: str
    """Unique name."""
    model: str
    """DNN model (one of the measured profiles: alexnet, resnet50, vgg19, ssd)."""
    target_ms: float
    """p99 latency target (ms) of one request, queueing included."""
    peak_rps: float
    """Request rate (requests/s) at the load curve's peak."""
    max_batch: int = 32
    """Largest batch the dynamic batcher forms (iGniter's profiles go to 32)."""
    max_queue_delay_ms: float = 2.0
    """How long the batcher waits for a fuller batch (Triton's max_queue_delay)."""
    load_curve: str = "servegen_m_large_daily"
    """Shipped daily curve (a file stem in arkgpu/data/load)."""
    phase_h: float = 0.0
    """Hours by which this service's day is shifted (services in other time zones)."""
    mem_mib: int = 2048
    """GPU memory the service needs (model, workspace, batches)."""


@dataclass(frozen=True)
class BeSpec:
    """A best-effort training job."""

    name: str
    """Unique name."""
    model: str
    """DNN model trained (its iteration time comes from its inference profile)."""
    batch: int = 32
    """Training batch size."""
    iterations: int = 10**9
    """Length of the job; it finishes after this many iterations."""
    mem_mib: int = 8192
    """GPU memory the job needs."""


@dataclass(frozen=True)
class Scenario:
    """A set of GPUs and the applications to co-locate on them."""

    name: str
    """Scenario name."""
    gpu: str
    """GPU model of every GPU (a name of arkgpu.model.gpus)."""
    gpus: int
    """Number of GPUs."""
    day_s: float
    """Simulated seconds into which one 24 h load cycle is compressed."""
    duration_s: float
    """Simulated horizon (s)."""
    lcs: tuple[LcSpec, ...]
    """LC services, in the order in which their pods arrive."""
    bes: tuple[BeSpec, ...]
    """BE jobs, arriving after the LC services."""
    control_period_s: float = 1.0
    """Period (simulated s) of metrics sampling and of the adaptive policies."""
    description: str = ""
    """Free text."""

    def scaled(self, peak_factor: float) -> Scenario:
        """The same scenario with every LC peak rate multiplied by ``peak_factor``."""
        lcs = tuple(dataclasses.replace(s, peak_rps=s.peak_rps * peak_factor) for s in self.lcs)
        return dataclasses.replace(self, lcs=lcs)


def shipped_scenarios() -> list[str]:
    """Names of the scenarios shipped in arkgpu/data/scenarios."""
    folder = resources.files("arkgpu") / "data" / "scenarios"
    return sorted(
        p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
    )


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a shipped scenario by name (``paper``) or a TOML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        shipped = resources.files("arkgpu") / "data" / "scenarios" / f"{name_or_path}.toml"
        if not shipped.is_file():
            raise ScenarioError(
                f"unknown scenario {name_or_path!r} (shipped: {shipped_scenarios()})"
            )
        return parse_scenario(shipped.read_text(encoding="utf-8"), f"{name_or_path}.toml")
    if not path.is_file():
        raise ScenarioError(f"{path}: no such scenario file")
    return parse_scenario(path.read_text(encoding="utf-8"), str(path))


def parse_scenario(text: str, source: str) -> Scenario:
    """Parse scenario TOML ``text``; ``source`` names it in errors."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    head = _Fields(doc.get("scenario"), source, "scenario")
    lcs = [_lc(t, source, i) for i, t in enumerate(_tables(doc, "lc", source))]
    bes = [_be(t, source, i) for i, t in enumerate(_tables(doc, "be", source))]
    scenario = Scenario(
        name=head.text("name"),
        gpu=head.text("gpu", REFERENCE_GPU),
        gpus=head.integer("gpus", low=1),
        day_s=head.number("day_s", low=1.0),
        duration_s=head.number("duration_s", low=1.0),
        lcs=tuple(s for group in lcs for s in group),
        bes=tuple(s for group in bes for s in group),
        control_period_s=head.number("control_period_s", 1.0, low=0.01),
        description=head.text("description", ""),
    )
    head.done()
    names = [s.name for s in scenario.lcs] + [b.name for b in scenario.bes]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ScenarioError(f"{source}: duplicate application names {dup}")
    if not scenario.lcs and not scenario.bes:
        raise ScenarioError(f"{source}: no [[lc]] or [[be]] tables")
    return scenario


def _tables(doc: dict[str, Any], key: str, source: str) -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise ScenarioError(f"{source}: {key}: must be an array of tables ([[{key}]])")
    unknown = sorted(set(doc) - {"scenario", "lc", "be"})
    if unknown:
        raise ScenarioError(f"{source}: unknown top-level keys {unknown}")
    return value


def _replicas(f: _Fields) -> tuple[int, float]:
    return f.integer("count", 1, low=1), f.number("phase_step_h", 0.0)


def _lc(table: Any, source: str, index: int) -> list[LcSpec]:
    f = _Fields(table, source, f"lc[{index}]")
    count, step = _replicas(f)
    base = LcSpec(
        name=f.text("name"),
        model=f.text("model"),
        target_ms=f.number("target_ms", low=0.001),
        peak_rps=f.number("peak_rps", low=0.0),
        max_batch=f.integer("max_batch", 32, low=1),
        max_queue_delay_ms=f.number("max_queue_delay_ms", 2.0, low=0.0),
        load_curve=f.text("load_curve", "servegen_m_large_daily"),
        phase_h=f.number("phase_h", 0.0),
        mem_mib=f.integer("mem_mib", 2048, low=1),
    )
    f.done()
    if count == 1:
        return [base]
    return [
        dataclasses.replace(base, name=f"{base.name}-{i + 1}", phase_h=base.phase_h + i * step)
        for i in range(count)
    ]


def _be(table: Any, source: str, index: int) -> list[BeSpec]:
    f = _Fields(table, source, f"be[{index}]")
    count, _ = _replicas(f)
    base = BeSpec(
        name=f.text("name"),
        model=f.text("model"),
        batch=f.integer("batch", 32, low=1),
        iterations=f.integer("iterations", 10**9, low=1),
        mem_mib=f.integer("mem_mib", 8192, low=1),
    )
    f.done()
    if count == 1:
        return [base]
    return [dataclasses.replace(base, name=f"{base.name}-{i + 1}") for i in range(count)]


_MISSING: Any = object()


class _Fields:
    """Typed access to one TOML table; remembers which keys were read."""

    def __init__(self, table: Any, source: str, where: str) -> None:
        if not isinstance(table, dict):
            raise ScenarioError(f"{source}: {where}: missing or not a table")
        self._table, self._where, self._source = table, where, source
        self._used: set[str] = set()

    def _get(self, key: str, default: Any) -> Any:
        self._used.add(key)
        if key in self._table:
            return self._table[key]
        if default is _MISSING:
            raise self.error(key, "required field is missing")
        return default

    def error(self, key: str, message: str) -> ScenarioError:
        """An error naming this table's file and ``key``."""
        return ScenarioError(f"{self._source}: {self._where}.{key}: {message}")

    def text(self, key: str, default: Any = _MISSING) -> str:
        """A string field (non-empty unless the default is empty)."""
        value = self._get(key, default)
        if not isinstance(value, str) or (not value and default != ""):
            raise self.error(key, f"must be a non-empty string, got {value!r}")
        return value

    def number(self, key: str, default: Any = _MISSING, low: float | None = None) -> float:
        """A number field, at least ``low`` when given."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, got {value!r}")
        if low is not None and value < low:
            raise self.error(key, f"must be >= {low}, got {value!r}")
        return float(value)

    def integer(self, key: str, default: Any = _MISSING, low: int | None = None) -> int:
        """An integer field, at least ``low`` when given."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        if low is not None and value < low:
            raise self.error(key, f"must be >= {low}, got {value!r}")
        return value

    def done(self) -> None:
        """Reject keys that no field read (typos)."""
        unknown = sorted(set(self._table) - self._used)
        if unknown:
            raise self.error(unknown[0], "unknown field")
