"""The node's side of online calibration: log each change, publish the factors.

The control loop (:class:`~arkgpu.colocation.deciding.NodeController`, with
``calibration`` on) keeps one correction per LC container
(:mod:`arkgpu.colocation.calibration`). After each tick the runtime hands the
corrections here:

* a container whose correction moved by ``report_step`` or more since last
  reported gets one line on standard error
  (``arkgpu node: calibration: lc-a (resnet50, GPU 0) 1.00 -> 1.32``);
* the corrections are published, when one moved, in
  ``<regions_dir>/calibration.json`` (written to a temporary file and renamed,
  so a reader never sees half a file): per container its model, GPU and factor,
  and per model the largest factor of its containers, what a placement of a new
  service of that model on this node should assume (the predictor's latency
  times the factor). A restarted runtime starts from the published factors.

The Prometheus gauge ``arkgpu_container_latency_correction_ratio``
(:mod:`arkgpu.node.metrics`) exports the same numbers.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arkgpu.node.pods import PodSpec

REPORT_STEP = 0.05
"""A correction is logged (and published) when it moved this much since last reported."""


@dataclass
class CalibrationLog:
    """What was last reported per container, and the count of changes."""

    path: Path
    """Where the corrections are published (``<regions_dir>/calibration.json``)."""
    reported: dict[str, float] = field(default_factory=dict)
    """Correction last logged per container."""
    changes: int = 0
    """Changes logged since the start (the metric's counter)."""

    def note(self, corrections: Mapping[str, float], specs: Mapping[str, PodSpec]) -> list[str]:
        """Log and publish what moved; returns the lines logged."""
        lines = []
        for name, value in sorted(corrections.items()):
            spec = specs.get(name)
            old = self.reported.get(name, 1.0)
            if spec is None or abs(value - old) < REPORT_STEP:
                continue
            self.reported[name] = value
            lines.append(
                f"arkgpu node: calibration: {spec.label} ({spec.model}, GPU {spec.gpu}) "
                f"{old:.2f} -> {value:.2f}"
            )
        gone = [n for n in self.reported if n not in specs]
        for name in gone:
            del self.reported[name]
        if lines or gone:
            self.changes += len(lines)
            for line in lines:
                print(line, file=sys.stderr, flush=True)
            publish(self.path, corrections, specs)
        return lines


def published_document(
    corrections: Mapping[str, float], specs: Mapping[str, PodSpec]
) -> dict[str, Any]:
    """The JSON document of ``calibration.json``."""
    services = {
        name: {"model": specs[name].model, "gpu": specs[name].gpu, "factor": round(value, 4)}
        for name, value in sorted(corrections.items())
        if name in specs
    }
    models: dict[str, float] = {}
    for name, value in corrections.items():
        if name in specs:
            model = specs[name].model
            models[model] = round(max(models.get(model, value), value), 4)
    return {"services": services, "models": models}


def publish(path: Path, corrections: Mapping[str, float], specs: Mapping[str, PodSpec]) -> None:
    """Write ``calibration.json`` atomically (a failure is reported, not raised)."""
    text = json.dumps(published_document(corrections, specs), indent=1, sort_keys=True)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        print(f"arkgpu node: calibration: cannot write {path}: {exc}", file=sys.stderr)


def read_published(path: Path) -> dict[str, float]:
    """Per container, the factor ``calibration.json`` holds ({} when missing or bad)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        services = raw["services"]
        out = {str(k): float(v["factor"]) for k, v in services.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return {k: v for k, v in out.items() if math.isfinite(v) and v > 0}
