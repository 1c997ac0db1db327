"""Bench outputs beyond the table: arkgpu's time-series plot and the sensitivity table."""

from pathlib import Path

from arkgpu.bench.colocation import BenchSpec, plot_arkgpu, run_bench
from arkgpu.bench.colocation_sensitivity import CASES, format_sensitivity, run_sensitivity
from colocation.colocation_helpers import be, lc


def _scenario(tmp_path: Path) -> str:
    path = tmp_path / "s.toml"
    path.write_text(
        '[scenario]\nname = "s"\ngpus = 1\nday_s = 30.0\nduration_s = 6.0\n'
        + lc("a", rps=150.0)
        + be("t"),
        encoding="utf-8",
    )
    return str(path)


def test_plot_writes_a_png_of_the_arkgpu_run(tmp_path: Path) -> None:
    """--plot: one PNG with load, share and p99/target for the arkgpu mode."""
    doc = run_bench(
        BenchSpec(_scenario(tmp_path), ("mps", "arkgpu"), (1,)), jobs=1, keep_series=True
    )
    path = plot_arkgpu(doc["_arkgpu_run"], tmp_path / "plots" / "arkgpu.png")
    assert path == tmp_path / "plots" / "arkgpu.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sensitivity_reports_every_case_against_every_baseline(tmp_path: Path) -> None:
    """One row per case (peak 0.5x/1x/1.5x, predictor -10%/+10%), one column per baseline;
    a larger peak means more LC requests arrive."""
    doc = run_sensitivity(_scenario(tmp_path), (1,), ("mps", "arkgpu"), jobs=1)
    assert list(doc["cases"]) == [label for label, _, _ in CASES]
    arrived = [c["modes"]["mps"]["lc"][0]["arrived"] for c in doc["cases"].values()]
    assert arrived[0] < arrived[1] < arrived[2]
    text = format_sensitivity(doc)
    assert "peak 1.5x" in text
    assert "mps" in text.splitlines()[1]
