"""Saving a fitted predictor as versioned JSON, and reading it back with clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from arkgpu.predictor.confidence import PAIR_KINDS, Support
from arkgpu.predictor.config import PredictorConfig
from arkgpu.predictor.curves import PARAMETER_NAMES, SoloCurve
from arkgpu.predictor.guarding import Guard, Shrink
from arkgpu.predictor.interference import FEATURE_NAMES, Interference
from arkgpu.predictor.utilisation import UtilCurve

FORMAT = "arkgpu-predictor"
VERSION = 4
"""Bumped whenever the formulas or the file layout change; other versions are refused
(3: level-2 activity became the batch elasticity, so version-2 thetas no longer apply;
4: level 2's guard, weights and intervals per kind and region, issue 35)."""
UTIL_NAMES = ("log_scale", "batch_exponent", "share_exponent")
SUPPORT_NAMES = ("min_batch", "max_batch", "min_share", "max_share", "points")
SHRINK_NAMES = ("weight", "low", "high", "count")


class PredictorFileError(ValueError):
    """A predictor file that cannot be read: corrupt, another format or another version."""


def write_predictor(
    path: Path | str,
    *,
    curves: dict[tuple[str, str], SoloCurve],
    utils: dict[tuple[str, str, str], UtilCurve],
    interference: dict[tuple[str, str], Interference],
    config: PredictorConfig,
    pair_scales: dict[tuple[str, str, str], float],
    support: dict[tuple[str, str], Support],
    intervals: dict[str, tuple[float, float]],
    guard: Guard,
) -> None:
    """Write a predictor's fitted parts to ``path`` as JSON."""
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "config": config.to_dict(),
        "level1": [{"gpu": g, "model": m, **c.to_dict()} for (g, m), c in curves.items()],
        "utilisation": [
            {"gpu": g, "model": m, "kind": k, **u.to_dict()} for (g, m, k), u in utils.items()
        ],
        "level2": [
            {
                "gpu": gpu,
                "features": kind,
                "names": list(FEATURE_NAMES[kind]),
                "theta": list(i.theta),
            }
            for (gpu, kind), i in interference.items()
        ],
        "pair_scales": [
            {"gpu": g, "target": t, "corunner": c, "scale": v}
            for (g, t, c), v in pair_scales.items()
        ],
        "support": [{"gpu": g, "model": m, **v.to_dict()} for (g, m), v in support.items()],
        "intervals": {k: list(v) for k, v in intervals.items()},
        "guard": [
            {"kind": k, "region": r, **{n: getattr(v, n) for n in SHRINK_NAMES}}
            for (k, r), v in guard.shrinks.items()
        ],
    }
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def _numbers(entry: dict[str, Any], names: tuple[str, ...]) -> list[float]:
    values = [entry[n] for n in names]
    if not all(isinstance(v, int | float) for v in values):
        raise TypeError(f"non-numeric parameter in {entry}")
    return [float(v) for v in values]


def _parse(doc: dict[str, Any]) -> tuple[Any, ...]:
    curves = {
        (e["gpu"], e["model"]): SoloCurve(*_numbers(e, PARAMETER_NAMES)) for e in doc["level1"]
    }
    utils = {
        (e["gpu"], e["model"], e["kind"]): UtilCurve(*_numbers(e, UTIL_NAMES))
        for e in doc["utilisation"]
    }
    interference = {}
    for entry in doc["level2"]:
        kind = entry["features"]
        if kind not in FEATURE_NAMES or list(entry["names"]) != list(FEATURE_NAMES[kind]):
            raise ValueError(f"unknown level-2 features {kind!r} {entry.get('names')}")
        theta = tuple(float(v) for v in entry["theta"])
        if len(theta) != len(FEATURE_NAMES[kind]) or min(theta, default=0.0) < 0:
            raise ValueError(f"level-2 theta {theta} does not fit features {kind!r}")
        interference[(str(entry["gpu"]), kind)] = Interference(kind, theta)
    scales = {}
    for entry in doc["pair_scales"]:
        scale = entry["scale"]
        if not isinstance(scale, int | float) or scale < 0:
            raise ValueError(f"pair scale {scale!r} is not a number >= 0")
        scales[(str(entry["gpu"]), str(entry["target"]), str(entry["corunner"]))] = float(scale)
    support = {(str(e["gpu"]), str(e["model"])): _support(e) for e in doc["support"]}
    intervals = {str(k): (float(low), float(high)) for k, (low, high) in doc["intervals"].items()}
    config = PredictorConfig.from_dict(doc["config"])
    guard = Guard({(str(e["kind"]), str(e["region"])): _shrink(e) for e in doc["guard"]})
    return curves, utils, interference, config, scales, support, intervals, guard


def _shrink(entry: dict[str, Any]) -> Shrink:
    weight, low, high, count = _numbers(entry, SHRINK_NAMES)
    if entry["kind"] not in PAIR_KINDS or not 0 <= weight <= 1 or not low <= 0 <= high:
        raise ValueError(f"level-2 guard entry {entry} out of range")
    return Shrink(weight, low, high, int(count))


def _support(entry: dict[str, Any]) -> Support:
    low_b, high_b, low_s, high_s, points = _numbers(entry, SUPPORT_NAMES)
    return Support(int(low_b), int(high_b), low_s, high_s, int(points), bool(entry["borrowed"]))


def read_predictor(path: Path | str) -> tuple[Any, ...]:
    """Parts of the predictor in ``path``, in the order of the Predictor's constructor."""
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise PredictorFileError(f"{path}: not a predictor file: invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PredictorFileError(f"{path}: not a predictor file (no 'format': '{FORMAT}')")
    if doc.get("version") != VERSION:
        raise PredictorFileError(
            f"{path}: predictor file version {doc.get('version')!r}; this arkgpu reads "
            f"version {VERSION} only: refit it with 'arkgpu predictor fit'"
        )
    try:
        return _parse(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PredictorFileError(f"{path}: corrupt predictor file: {exc!r}") from None
