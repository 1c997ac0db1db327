"""Predictor files: versioned JSON, refused with a clear error when wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.predictor import Predictor, PredictorFileError
from arkgpu.predictor.guarding import Guard, Shrink


def _saved(fitted: Predictor, tmp_path: Path) -> tuple[Path, dict[str, object]]:
    path = tmp_path / "p.json"
    fitted.save(path)
    return path, json.loads(path.read_text())


def test_other_version_is_refused(fitted: Predictor, tmp_path: Path) -> None:
    """A file of another format version names both versions and how to refit."""
    path, doc = _saved(fitted, tmp_path)
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match=r"version 99.*version 4.*predictor fit"):
        Predictor.load(path)
    doc["version"] = 2  # level-2 activity meant busy SMs x duty then: refit, not reuse
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match=r"version 2.*version 4.*predictor fit"):
        Predictor.load(path)
    doc["version"] = 3  # no level-2 guard then (issue 35): refit, not reuse
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match=r"version 3.*version 4.*predictor fit"):
        Predictor.load(path)


def test_level2_guard_round_trips_and_a_bad_weight_is_refused(
    fitted: Predictor, tmp_path: Path
) -> None:
    """Level 2's weights and intervals come back as saved; a weight above 1 (a guard that
    would amplify the contention model) is refused on load."""
    path, doc = _saved(fitted, tmp_path)
    assert fitted.guard.shrinks
    assert Predictor.load(path).guard == fitted.guard
    doc["guard"][0]["weight"] = 1.5  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match="corrupt"):
        Predictor.load(path)


def test_corrupt_files_are_refused(fitted: Predictor, tmp_path: Path) -> None:
    """Truncated JSON, a foreign JSON file and a damaged entry each raise PredictorFileError."""
    path, doc = _saved(fitted, tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(PredictorFileError, match="invalid JSON"):
        Predictor.load(path)
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(PredictorFileError, match="not a predictor file"):
        Predictor.load(path)
    doc["level1"][0]["work_ms"] = "fast"  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match="corrupt"):
        Predictor.load(path)


def test_negative_interference_coefficient_is_refused(fitted: Predictor, tmp_path: Path) -> None:
    """A level-2 coefficient below zero would allow slowdowns under 1: refused on load."""
    path, doc = _saved(fitted, tmp_path)
    doc["level2"][0]["theta"][0] = -1.0  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match="corrupt"):
        Predictor.load(path)


def test_negative_pair_scale_is_refused(fitted: Predictor, tmp_path: Path) -> None:
    """A per-combination scale below zero would allow slowdowns under 1: refused on load."""
    path, doc = _saved(fitted, tmp_path)
    doc["pair_scales"][0]["scale"] = -0.5  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorFileError, match="corrupt"):
        Predictor.load(path)


def test_a_gpu_own_guard_round_trips(fitted: Predictor, tmp_path: Path) -> None:
    """A guard fitted per GPU (keys ``GPU|region``, several GPUs' pairs) comes back as saved
    and is found first for its GPU."""
    own = Shrink(0.5, -0.05, 0.1, 40)
    guard = Guard({**fitted.guard.shrinks, ("new-pair", "V100|<1.10"): own})
    path = tmp_path / "gpu.json"
    fitted._with(guard=guard).save(path)
    loaded = Predictor.load(path).guard
    assert loaded == guard
    assert loaded.find("new-pair", 1.05, "V100") == own
