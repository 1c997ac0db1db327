"""The demo's workflow: parts merged, a failing part reported (not fatal), text summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.bench import report
from arkgpu.bench.report import DemoConfig, DemoResults, merge_modes, run_demo, summary_lines
from arkgpu.bench.report_html import write_report
from arkgpu.cli.main import main
from report.report_data import synthetic_results


def _one_mode_doc(mode: str, goodput: float) -> dict[str, object]:
    entry = {"normalized_goodput": goodput, "goodput_rps": 10 * goodput}
    entry |= {"lc_throughput_rps": 10.0, "be_throughput_norm": 1.0}
    return {"modes": {mode: entry}, "skipped": {}}


def test_one_mode_documents_merge_in_configured_order_with_ratios() -> None:
    """Modes come back in completion order; the merged document follows the config's."""
    config = DemoConfig(modes=("mps", "mig", "arkgpu"))
    docs = {"arkgpu": _one_mode_doc("arkgpu", 8.0), "mps": _one_mode_doc("mps", 4.0)}
    docs["mig"] = {"modes": {}, "skipped": {"mig": "needs A100"}}
    merged = merge_modes(config, docs)
    assert list(merged["modes"]) == ["mps", "arkgpu"]
    assert merged["skipped"] == {"mig": "needs A100"}
    assert merged["ratios"] == {"arkgpu_vs_mps": 2.0}
    assert merged["seeds"] == [1]


def test_a_failing_part_is_recorded_and_the_page_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A part that raises (here: the limiter library not built) leaves the others' results."""

    def not_built(config: DemoConfig, results: DemoResults) -> None:
        raise FileNotFoundError("libarkgpu_limiter.so is not built: run `make native`")

    monkeypatch.setattr(report, "PARTS", (("limiter", not_built),))
    results = run_demo(DemoConfig())
    assert results.failed == {
        "limiter": "FileNotFoundError: libarkgpu_limiter.so is not built: run `make native`"
    }
    assert "limiter" in results.wall_s
    page = write_report(results, tmp_path).read_text()
    assert "Not run: FileNotFoundError: libarkgpu_limiter.so is not built" in page


def test_demo_exits_non_zero_when_a_part_failed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report is still written; the error is one line on standard error; status 1."""

    def broken(config: DemoConfig, results: DemoResults) -> None:
        raise RuntimeError("worker died")

    monkeypatch.setattr(report, "PARTS", (("colocation", broken),))
    assert main(["demo", "--only", "colocation", "--out", str(tmp_path)]) == 1
    assert (tmp_path / "report.html").is_file()
    err = capsys.readouterr().err
    assert "arkgpu: error: demo part colocation did not run: RuntimeError: worker died" in err


def test_summary_has_a_line_per_policy_the_bound_and_the_limiter() -> None:
    """The text printed after the run: lower-is-better said, LP bound and limiter error."""
    results = synthetic_results()
    results.placement = {
        "policies": {
            name: {
                "unallocated_gpu_pct_at_100": value,
                "sd": 0.1,
                "published_mean": None,
                "published_sd": None,
                "wall_s_median": 1.0,
                "cpu_s_median": 1.0,
                "decision_ms_median": 0.1,
                "decision_ms_p99": 0.2,
                "peak_rss_mb": 90.0,
            }
            for name, value in (("fgd", 5.0), ("arkgpu", 3.8))
        }
    }
    results.colocation = None
    lines = summary_lines(results)
    assert "lower is better" in lines[0]
    assert lines[1].split()[:2] == ["fgd", "5.00"]
    assert lines[2].split()[:2] == ["arkgpu", "3.80"]
    assert lines[3].split() == ["LP", "bound", "3.07"]
    assert lines[4].endswith("largest share error 0.80 percentage points")
