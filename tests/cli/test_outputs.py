"""The output convention: ``--json [PATH]`` and ``--plot PATH`` mean the same everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.cli.main import main


def test_json_to_standard_output_replaces_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    """``--json -`` (or a bare ``--json``) prints the JSON document alone, no table."""
    for argv in (["--json", "-"], ["--json"]):
        assert main(["colocate", "mps-check", *argv]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert {"summaries", "rows", "skipped"} <= set(doc)


def test_json_to_a_file_creates_its_folder_and_keeps_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json PATH`` writes the file (creating missing folders) and still prints the table."""
    path = tmp_path / "new" / "dir" / "mps.json"
    assert main(["colocate", "mps-check", "--json", str(path)]) == 0
    assert json.loads(path.read_text())["summaries"]
    out = capsys.readouterr().out
    assert "processes n" in out
    assert "above 1: slower than fair" in out


def test_a_bad_output_path_fails_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An output under a file fails at once, and nothing is created."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["placement", "bench", "--seeds", "42", "--json", str(tmp_path / "ok.json")]
    assert main([*argv, "--plot", f"{blocker}/p.png"]) == 2
    assert "--plot" in capsys.readouterr().err
    assert not (tmp_path / "ok.json").exists()
