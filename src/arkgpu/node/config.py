"""The node runtime's settings, loaded from a TOML file.

Every key of the file is a field of :class:`NodeConfig` (top level) or of
:class:`~arkgpu.colocation.adjusting.AdjustmentConfig` (table ``[adjustment]``);
an unknown key, a wrong type or a value out of range stops the load with one
line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from arkgpu.colocation.adjusting import AdjustmentConfig
from arkgpu.colocation.calibration import CalibrationConfig
from arkgpu.model import settings
from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.model.settings import Parser, boolean, integer, number, parsed, path, subtable, text

LOCK_NAME = ".arkgpu-node.lock"
"""Name of the lock file in the regions directory (when ``lock_file`` is not set)."""


@dataclass(frozen=True)
class NodeConfig:
    """Settings of ``arkgpu node run`` (units and defaults in each field's text)."""

    regions_dir: Path = Path("/run/arkgpu/regions")
    """Directory holding one control region folder per container (its ``limits``,
    ``usage`` and ``pod.json``); default /run/arkgpu/regions."""
    period_s: float = 0.1
    """Control period, seconds (default 0.1): the limiter's 20 ms pacing bucket
    settles well inside it, and 10 decisions a second follow a load step."""
    scan_every: int = 5
    """Look for new and gone regions every this many periods (default 5: 0.5 s)."""
    lock_file: Path | None = None
    """Lock file that keeps a second runtime off the node; default
    ``<regions_dir>/.arkgpu-node.lock``."""
    predictor: Path | None = None
    """Predictor JSON (``arkgpu predictor fit``); default: fitted at start on the
    profiles shipped in the package."""
    gpu_model: str = REFERENCE_GPU
    """GPU model the predictor is asked about (default V100, the reference)."""
    nvml: bool = True
    """Discover GPUs through NVML (default true); false: assume ``gpus`` GPUs."""
    gpus: int = 1
    """GPUs assumed when ``nvml`` is false (default 1)."""
    lend_idle_share: bool = True
    """BE containers borrow an LC container's share while it has no batch in
    flight (default true)."""
    metrics_port: int = 0
    """TCP port of ``/metrics``, ``/healthz`` and ``/readyz`` (default 0: no endpoint;
    9402 is a usual choice)."""
    metrics_address: str = "127.0.0.1"
    """Address the endpoint listens on (default 127.0.0.1; 0.0.0.0 for a scraper
    on another host)."""
    backstop: str = "off"
    """What the escape backstop does when NVML shows a container's processes over
    their cap by ``backstop_margin_mib``: "off" (default), "report", "kill"
    (SIGTERM, then SIGKILL) or "evict" (``<region>/evict`` for the device plugin).
    Needs ``nvml``."""
    backstop_margin_mib: int = 64
    """How far over its memory cap a container may go before the backstop acts, MiB
    (default 64: above the driver's own per-context overhead)."""
    backstop_grace_s: float = 2.0
    """Time between SIGTERM and SIGKILL of the ``kill`` action, s (default 2)."""
    backstop_unattached: bool = True
    """Also act (``backstop``'s action) on a container whose GPU processes, as NVML lists
    them, outnumber the processes its usage file shows attached to the library, two checks
    in a row: the library did not load there (an image whose glibc it cannot use, a
    cleared LD_PRELOAD), so the container would run without cap or share (default true)."""
    adjustment: AdjustmentConfig = field(default_factory=AdjustmentConfig)
    """The control law's parameters (table ``[adjustment]``; docs/NODE.md)."""
    calibrate: bool = True
    """Online calibration: each LC container's measured batch time corrects the
    predictor for it (default true; docs/NODE.md). Needs servers that report per
    batch (``LatencyReporter.batch``)."""
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    """The calibration's parameters (table ``[calibration]``; docs/NODE.md)."""

    @property
    def lock_path(self) -> Path:
        """The lock file actually used."""
        return self.lock_file or self.regions_dir / LOCK_NAME


PARSERS: dict[str, Parser] = {
    "regions_dir": path,
    "period_s": number(0.0, 60.0),
    "scan_every": integer(1),
    "lock_file": path,
    "predictor": path,
    "gpu_model": text,
    "nvml": boolean,
    "gpus": integer(1),
    "lend_idle_share": boolean,
    "calibrate": boolean,
    "metrics_port": integer(0),
    "metrics_address": text,
    "backstop": text,
    "backstop_margin_mib": integer(0),
    "backstop_grace_s": number(0.0, 600.0),
    "backstop_unattached": boolean,
}
"""How each top-level field is read from TOML."""

ADJUSTMENT_PARSERS: dict[str, Parser] = {
    "violation_ratio": number(0.0, 10.0),
    "relax_ratio": number(0.0, 10.0),
    "raise_step": number(0.0, 1.0),
    "release_step": number(0.0, 1.0),
    "max_boost": number(0.0, 1.0),
    "rate_smoothing": number(0.0, 1.0),
    "min_lc_bp": integer(0),
}
"""How each field of ``[adjustment]`` is read."""

CALIBRATION_PARSERS: dict[str, Parser] = {
    "min_factor": number(0.0, 1.0),
    "max_factor": number(0.0, 100.0),
    "response_s": number(0.0, 86_400.0),
    "decay_half_life_s": number(0.0, 10_000_000.0),
    "resolution": number(0.0, 1.0),
    "min_batches": integer(1),
}
"""How each field of ``[calibration]`` is read."""


def config_from_dict(table: dict[str, Any], source: str = "config") -> NodeConfig:
    """The configuration a parsed TOML table describes (ValueError naming the field)."""
    top = dict(table)
    tables = {key: subtable(top, key, source) for key in ("adjustment", "calibration")}
    values = parsed(top, PARSERS, f"{source}: ")
    law = parsed(tables["adjustment"], ADJUSTMENT_PARSERS, f"{source}: [adjustment] ")
    learning = parsed(tables["calibration"], CALIBRATION_PARSERS, f"{source}: [calibration] ")
    config = replace(
        NodeConfig(**values),
        adjustment=replace(AdjustmentConfig(), **law),
        calibration=replace(CalibrationConfig(), **learning),
    )
    if config.backstop not in ("off", "report", "kill", "evict"):
        raise ValueError(
            f"{source}: field backstop: expected off, report, kill or evict, "
            f"got {config.backstop!r}"
        )
    if config.backstop != "off" and not config.nvml:
        raise ValueError(f"{source}: field backstop: needs nvml = true (NVML's process memory)")
    if config.metrics_port > 65_535:
        raise ValueError(f"{source}: field metrics_port: at most 65535, got {config.metrics_port}")
    if config.calibration.max_factor < 1.0:
        raise ValueError(f"{source}: [calibration] field max_factor: at least 1")
    if config.adjustment.min_lc_bp > 10_000:
        raise ValueError(f"{source}: [adjustment] field min_lc_bp: at most 10000 basis points")
    return config


def load_config(path: Path) -> NodeConfig:
    """Read ``path`` (TOML); ValueError with one line naming the file and the field."""
    return settings.load_settings(path, config_from_dict)


def field_names() -> list[str]:
    """Every top-level field, in order (docs and tests)."""
    return [f.name for f in fields(NodeConfig)]
