"""The demo's report in a real headless browser (Debian's chromium, DevTools protocol).

The page must load with no console error, no uncaught exception and no failed
resource; every image must decode to a real size; a full-page screenshot must
not be blank. Chromium is required: without it these tests fail with a message
saying how to install it (scripts/ensure-chromium.sh), they are never skipped.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from arkgpu.bench.report_html import write_report
from arkgpu.cli.main import main
from report.browser_cdp import PageReport, find_browser, load_page
from report.report_data import synthetic_results

FIGURES = (
    "placement-unallocated.png",
    "placement-curves.png",
    "colocation-modes.png",
    "colocation-arkgpu-series.png",
    "limiter-shares.png",
)
"""Every figure of a full report, in page order."""

MIN_PIXEL_SD = 10.0
"""Standard deviation of grey levels (0-255) below which a screenshot counts as blank."""


def pixel_sd(png: bytes) -> float:
    """Standard deviation of the grey levels of a PNG."""
    grey = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return float(grey.std())


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser; its absence is a failure, not a skip."""
    path = find_browser()
    if path is None:
        pytest.fail(
            "chromium is not installed: run scripts/ensure-chromium.sh "
            "(apt-get install chromium); the report's browser tests need it"
        )
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full report written from results of every part."""
    return write_report(synthetic_results(), tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def loaded(chromium: str, page: Path) -> PageReport:
    """The full report as chromium shows it."""
    return load_page(page)


def test_page_loads_without_console_error(loaded: PageReport) -> None:
    """No console error, exception or failed load while the page loads."""
    assert loaded.errors == []


def test_every_image_renders(loaded: PageReport) -> None:
    """Each of the five figures decodes to a real size."""
    assert len(loaded.images) == len(FIGURES)
    for image in loaded.images:
        assert image["decoded"], image
        assert image["width"] > 300, image
        assert image["height"] > 200, image


def test_screenshot_is_not_blank(loaded: PageReport) -> None:
    """The full-page screenshot is tall (five figures) and has real contrast."""
    shot = Image.open(io.BytesIO(loaded.screenshot_png))
    assert shot.height > 2000
    assert pixel_sd(loaded.screenshot_png) > MIN_PIXEL_SD


def test_page_is_self_contained_and_figures_are_written(page: Path) -> None:
    """Every image is embedded as a base64 PNG, nothing is fetched, and each is also a file."""
    text = page.read_text()
    sources = re.findall(r'<img src="([^"]*)"', text)
    assert len(sources) == len(FIGURES)
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r"(src|href)=\"(https?:|//|file:)", text)
    for name in FIGURES:
        assert (page.parent / name).stat().st_size > 10_000, name


def test_each_figure_says_what_it_shows_and_how_to_reproduce_it(page: Path) -> None:
    """A caption and a command under each figure; the shrinking is said."""
    text = page.read_text()
    assert text.count("<figcaption>") == len(FIGURES)
    for command in (
        "arkgpu placement bench",
        "arkgpu placement bound",
        "arkgpu colocate bench",
        "arkgpu limiter bench",
    ):
        assert command in text
    assert "instead of" in text  # the note on what the demo shrank
    assert "LP bound" in text


def test_checker_catches_errors_broken_images_and_blank_pages(
    chromium: str, tmp_path: Path
) -> None:
    """The checks can fail: a console error, a missing file, a bad image, an empty page."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><img src="data:image/png;base64,AAAA" alt="bad">'
        '<script>console.error("boom")</script><img src="missing.png" alt="gone">'
        "<script>undefinedFunction()</script></body></html>"
    )
    report = load_page(bad)
    assert any("boom" in e for e in report.errors)
    assert any("missing.png" in e for e in report.errors)
    assert any("undefinedFunction" in e for e in report.errors)
    assert [i["decoded"] for i in report.images] == [False, False]
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    assert pixel_sd(load_page(empty).screenshot_png) < MIN_PIXEL_SD


def test_demo_writes_a_page_chromium_shows(chromium: str, tmp_path: Path) -> None:
    """``arkgpu demo --only limiter``: a real run; its page loads cleanly and says what was
    left out."""
    out = tmp_path / "out"
    assert main(["demo", "--only", "limiter", "--out", str(out)]) == 0
    page = out / "report.html"
    report = load_page(page)
    assert report.errors == []
    assert len(report.images) == 1
    assert report.images[0]["decoded"]
    assert report.images[0]["width"] > 300
    assert page.read_text().count("not part of this run") == 3
    assert (out / "limiter.json").is_file()
    assert (out / "limiter-shares.png").is_file()


def test_demo_refuses_bad_options_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --out that is a file, --seeds 0 and --jobs 0 are one-line errors naming the option."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = (
        (["--out", str(afile)], "--out"),
        (["--seeds", "0", "--out", str(tmp_path)], "--seeds"),
        (["--jobs", "0", "--out", str(tmp_path)], "--jobs"),
    )
    for extra, option in cases:
        assert main(["demo", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("arkgpu: error: ")
        assert option in err
        assert len(err.splitlines()) == 1


def test_demo_includes_the_node_runtime_part(chromium: str, tmp_path: Path) -> None:
    """``arkgpu demo --only node``: the node runtime runs on the fake GPU (real processes);
    the page shows its figure with what it measured, beside the benches it left out, and
    its JSON holds the figures the node demo reports."""
    out = tmp_path / "out"
    assert main(["demo", "--only", "node", "--out", str(out)]) == 0
    page = out / "report.html"
    report = load_page(page)
    assert report.errors == []
    assert len(report.images) == 1
    assert report.images[0]["decoded"]
    text = page.read_text()
    assert "Node runtime" in text
    assert "arkgpu node demo" in text
    assert text.count("not part of this run") == 4
    doc = json.loads((out / "node.json").read_text())
    assert set(doc["lc_p99_over_target_max"]) == {"high", "low", "high_again"}
    assert 0.0 <= doc["be_busy_share_of_leftover"] <= 1.5
    assert (out / "node-demo.png").is_file()
