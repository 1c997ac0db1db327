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


TINY_SCENARIO = (
    '[scenario]\nname = "t"\ngpus = 2\nday_s = 60.0\nduration_s = 10.0\n'
    '[[lc]]\nname = "a"\nmodel = "resnet50"\ntarget_ms = 25.0\npeak_rps = 150.0\n'
    'mem_mib = 2048\n[[be]]\nname = "t"\nmodel = "vgg19"\niterations = 1000000000\n'
    "mem_mib = 8192\n"
)


def test_colocate_bench_plot_is_a_png_file(tmp_path: Path) -> None:
    """``colocate bench --plot PATH`` writes one PNG at PATH (folders created), like every
    other ``--plot``; ``--json`` beside it writes the document."""
    scenario = tmp_path / "t.toml"
    scenario.write_text(TINY_SCENARIO)
    png, doc = tmp_path / "figs" / "ark.png", tmp_path / "out" / "bench.json"
    argv = ["colocate", "bench", "--scenario", str(scenario), "--modes", "arkgpu"]
    assert main([*argv, "--seeds", "1", "--plot", str(png), "--json", str(doc)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(png.parent.iterdir()) == [png]
    assert json.loads(doc.read_text())["seeds"] == [1]
