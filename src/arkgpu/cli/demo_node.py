"""The node runtime's part of ``arkgpu demo``: run it, write its figure and JSON, make its section.

It lives in the command line because the report's package (``arkgpu.bench``)
may not import the node runtime (import contract); the page takes the
finished section as it takes its own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from arkgpu.bench.progress import ProgressReporter
from arkgpu.bench.report_html import Figure, Section

TITLE = "Node runtime: one LC and one BE container sharing a (fake) GPU"
FIGURE = "node-demo.png"
COMMAND = "arkgpu node demo --json node.json --plot node-demo.png"


def node_section(out: Path) -> tuple[Section, float]:
    """Run the node demo into ``out``; its section and how long it took (s)."""
    start = time.monotonic()
    try:
        report = _run(out)
    except (OSError, RuntimeError, ValueError) as exc:
        return Section(TITLE, (), failed=f"{type(exc).__name__}: {exc}"), time.monotonic() - start
    return Section(TITLE, (_figure(report),)), time.monotonic() - start


def _run(out: Path) -> dict[str, Any]:
    from arkgpu.node.demo import DemoConfig, run_demo, summarise  # noqa: PLC0415
    from arkgpu.node.demo_plot import plot_demo  # noqa: PLC0415

    config = DemoConfig()
    with ProgressReporter("node runtime demo", 2) as progress:
        run = run_demo(config, progress=progress.advance)
    report = summarise(config, run)
    (out / "node.json").write_text(json.dumps(report, indent=2) + "\n")
    plot_demo(config, run, out / FIGURE)
    return report


def _figure(report: dict[str, Any]) -> Figure:
    worst = max(report["lc_p99_over_target_max"].values())
    caption = (
        "Real processes on the project's fake GPU under the interception library: the node "
        "runtime splits the GPU between an LC inference server (p99 target "
        f"{report['target_ms']:g} ms) and a BE training loop while the LC load steps from "
        f"high to half and back. The LC p99 stayed at most {worst:.2f} of its target in every "
        f"phase; BE used {report['be_busy_share_of_leftover']:.0%} of the busy time LC left; "
        f"BE's share rose {report['be_share_rise_s']:.1f} s after the load halved."
    )
    return Figure(FIGURE, "node runtime demo: shares, LC p99 and BE throughput", caption, COMMAND)


def summary_line(section: Section) -> str:
    """One line for the terminal."""
    if section.failed is not None:
        return f"Node runtime demo did not run: {section.failed}"
    return f"Node runtime on the fake GPU: see {FIGURE} ({section.figures[0].caption})"
