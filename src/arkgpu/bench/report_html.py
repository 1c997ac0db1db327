"""The demo's report: PNG figures, JSON documents and one self-contained HTML page.

The page has no external resource and no script: every figure is embedded as
a base64 PNG (and also written beside the page), so it can be mailed, opened
offline or attached to a CI run. Under each figure: one sentence on what it
shows and the command that reproduces it at full size.
"""

from __future__ import annotations

import base64
import html
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.bench import colocation, plots
from arkgpu.bench.progress import format_duration
from arkgpu.bench.report import DemoResults
from arkgpu.traces.catalog import published_allocation_curves, published_unallocated

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
figure { margin: 1em 0; } img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { margin-top: 0.4em; } code, pre { background: #f4f4f4; border-radius: 3px; }
pre { padding: 0.5em; white-space: pre-wrap; } .meta { color: #666; font-size: 0.9em; }
.shrunk { background: #fff8e1; padding: 0.6em 1em; border-left: 4px solid #f0b400; }
.failed { background: #fdecea; padding: 0.6em 1em; border-left: 4px solid #d93025; }
"""


@dataclass(frozen=True)
class Figure:
    """One figure of the page: its file, what it shows, how to get it at full size."""

    file: str
    """PNG file name, written beside the page."""
    alt: str
    """Alternative text."""
    caption: str
    """One sentence: what the figure shows (with the headline figure where there is one)."""
    command: str
    """The command that reproduces it (full size)."""


@dataclass(frozen=True)
class Section:
    """A part of the page: a heading and its figures, or why the part did not run."""

    title: str
    figures: tuple[Figure, ...]
    failed: str | None = None


def write_report(results: DemoResults, out: Path, extra: Sequence[Section] = ()) -> Path:
    """Write the PNGs, the JSON documents and ``report.html`` into ``out``; return the page.

    ``extra``: sections made by parts that ``arkgpu.bench`` may not run itself
    (the node runtime's demo: bench never imports the node package), with
    their figures already written into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(results, out)
    sections = [
        placement_section(results, out),
        colocation_section(results, out),
        series_section(results, out),
        limiter_section(results, out),
        *extra,
    ]
    page = out / "report.html"
    page.write_text(render_page(results, sections, out), encoding="utf-8")
    return page


def write_json(results: DemoResults, out: Path) -> None:
    """The measured documents, as the benches write them."""
    docs = {
        "placement.json": results.placement,
        "colocation.json": results.colocation,
        "limiter.json": results.limiter,
    }
    for name, doc in docs.items():
        if doc is not None:
            (out / name).write_text(json.dumps(doc, indent=2) + "\n")


def _guard(
    title: str, results: DemoResults, part: str, draw: Callable[[], tuple[Figure, ...]]
) -> Section:
    """The section, or one saying why its part did not run."""
    if part in results.failed:
        return Section(title, (), failed=results.failed[part])
    if part not in results.wall_s:
        return Section(title, (), failed=f"not part of this run (arkgpu demo --only {part})")
    return Section(title, draw())


def placement_section(results: DemoResults, out: Path) -> Section:
    """Unallocated GPU % at 100% arrived as bars, and the curves it is read from."""
    return _guard(
        "Placement: how much of the cluster's GPU capacity is left unallocated",
        results,
        "placement",
        lambda: _placement_figures(results, out),
    )


def _placement_figures(results: DemoResults, out: Path) -> tuple[Figure, ...]:
    doc = results.placement
    if doc is None:
        return ()
    label, policies = str(doc["trace"]), doc["policies"]
    seeds = f"seeds {doc['seeds'][0]}-{doc['seeds'][-1]}"
    ours = {n: (p["unallocated_gpu_pct_at_100"], p["sd"]) for n, p in policies.items()}
    published = {n: (p.mean, p.sd) for n, p in published_unallocated(label).items()}
    plots.plot_unallocated_bars(
        out / "placement-unallocated.png",
        f"openb default trace, {seeds} (simulated) beside FGD's published 42-51",
        ours,
        published,
        results.lp_bound_pct,
    )
    curves = {n: p["allocation_pct_mean"] for n, p in policies.items()}
    plots.plot_allocation(
        out / "placement-curves.png",
        f"openb default trace, mean of {seeds} (simulated)",
        curves,
        published_allocation_curves(label),
    )
    best = min(ours, key=lambda n: ours[n][0])
    policy_list = ",".join(policies)
    return (
        Figure(
            "placement-unallocated.png",
            "bar chart of unallocated GPU percent per placement policy",
            f"Share of GPU capacity no pod holds when requests equal to 100% of it have "
            f"arrived (lower is better): {best} leaves {ours[best][0]:.2f}%, FGD's published "
            f"best (fgd) {published.get('fgd', (float('nan'), 0))[0]:.2f}%; no online policy "
            f"can go below the LP bound on the same arrival order.",
            f"arkgpu placement bench --trace default --policies {policy_list} --seeds 42-51\n"
            "arkgpu placement bound --trace default --seed 42",
        ),
        Figure(
            "placement-curves.png",
            "unallocated GPU percent against arrived percent, one line per policy",
            "The same runs as arrivals grow: unallocated GPU % against arrived GPU requests "
            "(ours solid, FGD's published dashed); the dots mark 100% arrived, where the bars "
            "above are read.",
            f"arkgpu placement bench --trace default --policies {policy_list} --seeds 42-51 "
            "--plot out/placement-curves.png",
        ),
    )


def colocation_section(results: DemoResults, out: Path) -> Section:
    """The sharing modes side by side."""
    return _guard(
        "Co-location: LC inference and BE training sharing 4 V100s, per sharing mode",
        results,
        "colocation",
        lambda: _colocation_figures(results, out),
    )


def _colocation_figures(results: DemoResults, out: Path) -> tuple[Figure, ...]:
    doc = results.colocation
    if doc is None or not doc["modes"]:
        return ()
    modes = doc["modes"]
    plots.plot_colocation_modes(
        out / "colocation-modes.png",
        f"scenario {doc['scenario']}, seed {doc['seeds'][0]} (simulated on measured V100 profiles)",
        modes,
    )
    return (
        Figure(
            "colocation-modes.png",
            "bar charts of goodput, SLO attainment and BE throughput per sharing mode",
            f"Goodput (LC requests within target plus BE work, each relative to running alone), "
            f"the worst LC service's SLO attainment and BE throughput for each sharing mode"
            f"{_gain(modes)}.",
            f"arkgpu colocate bench --scenario paper --modes {','.join(modes)} --seeds 1-5",
        ),
    )


def _gain(modes: dict[str, Any]) -> str:
    """``; arkgpu's ... is 1.23x that of the next best mode (mps)``, or nothing."""
    others = [m for m in modes if m != "arkgpu"]
    if "arkgpu" not in modes or not others:
        return ""
    best = max(others, key=lambda m: float(modes[m]["normalized_goodput"]))
    ratio = float(modes["arkgpu"]["normalized_goodput"]) / float(modes[best]["normalized_goodput"])
    return f"; arkgpu's normalised goodput is {ratio:.2f}x that of the next best mode ({best})"


def series_section(results: DemoResults, out: Path) -> Section:
    """The arkgpu mode's run over the day."""
    return _guard(
        "The arkgpu mode over one day: load, shares and latency",
        results,
        "colocation",
        lambda: _series_figures(results, out),
    )


def _series_figures(results: DemoResults, out: Path) -> tuple[Figure, ...]:
    run = results.arkgpu_run
    if run is None or run.series is None:
        return ()
    plots.plot_series(
        out / "colocation-arkgpu-series.png",
        f"arkgpu on scenario {run.scenario}, seed {run.seed} (simulated)",
        run.series,
    )
    return (
        Figure(
            "colocation-arkgpu-series.png",
            "time series of LC load, LC and BE compute shares and p99 over target",
            f"As each service's load follows its daily curve, the adjustment unit moves compute "
            f"share between the LC services and the BE jobs, keeping each period's p99 latency "
            f"under its target (below the dashed line); the worst service has "
            f"{run.slo_attainment_min_pct:.2f}% of its requests within target.",
            f"arkgpu colocate bench --scenario {run.scenario} --modes arkgpu --seeds {run.seed} "
            "--plot out/arkgpu-series.png",
        ),
    )


def limiter_section(results: DemoResults, out: Path) -> Section:
    """Share accuracy of the interception library on the fake GPU."""
    return _guard(
        "Resource limiter: compute share set against share achieved",
        results,
        "limiter",
        lambda: _limiter_figures(results, out),
    )


def _limiter_figures(results: DemoResults, out: Path) -> tuple[Figure, ...]:
    report = results.limiter
    if report is None:
        return ()
    plots.plot_limiter_shares(
        out / "limiter-shares.png",
        "interception library on the fake GPU (real processes)",
        report["share_cases"],
    )
    shares = ",".join(f"{s:g}" for s in results.config.limiter.shares)
    return (
        Figure(
            "limiter-shares.png",
            "achieved busy share against the compute share set",
            f"Each container is paced to the compute share it is given, alone and beside a busy "
            f"co-runner given the rest of the GPU; the largest error is "
            f"{report['share_error_pts_max']:.2f} percentage points over runs of "
            f"{results.config.limiter.seconds:g} s (real processes: on a loaded machine their "
            f"late wake-ups show as error).",
            f"arkgpu limiter bench --shares {shares} --plot out/limiter.png",
        ),
    )


def _embedded(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _figure_html(figure: Figure, out: Path) -> str:
    e = html.escape
    return (
        f'<figure><img src="{_embedded(out / figure.file)}" alt="{e(figure.alt)}">'
        f"<figcaption>{e(figure.caption)}<br>Reproduce (full size):"
        f"<pre><code>{e(figure.command)}</code></pre></figcaption></figure>"
    )


def _section_html(section: Section, out: Path) -> str:
    body = [f"<h2>{html.escape(section.title)}</h2>"]
    if section.failed is not None:
        body.append(f'<p class="failed">Not run: {html.escape(section.failed)}</p>')
    body += [_figure_html(f, out) for f in section.figures]
    return "\n".join(body)


def shrunk_note(results: DemoResults) -> str:
    """What the demo shrank, against the full benches."""
    c = results.config
    return (
        f"To run in about two minutes on two cores, this demo is smaller than the full "
        f"benches: placement on {len(c.seeds)} seeds ({c.seeds[0]}-{c.seeds[-1]}) instead of "
        f"FGD's ten (42-51); co-location on one seed instead of five, {len(c.modes)} of the 9 "
        f"sharing modes, on the <code>demo</code> scenario: the paper scenario with its "
        f"24-hour load cycle compressed into 8 simulated minutes instead of 24 (the same "
        f"services, peaks and adjustment periods per day, a third of the requests); limiter "
        f"share runs of {c.limiter.seconds:g} s instead of 3 s. Figures are simulated except "
        f"the limiter's, which are real processes on the project's fake GPU driver."
    )


def render_page(results: DemoResults, sections: list[Section], out: Path) -> str:
    """The whole page."""
    took = ", ".join(f"{k} {format_duration(v)}" for k, v in results.wall_s.items())
    meta = (
        f"Generated {time.strftime('%Y-%m-%d %H:%M %Z')} by <code>arkgpu demo</code> on "
        f"{html.escape(platform.node())} ({os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}); took {took or 'n/a'}."
    )
    body = "\n".join(_section_html(s, out) for s in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>ArkGPU demo report</title>"
        f"<style>{STYLE}</style></head><body>\n"
        "<h1>ArkGPU demo report</h1>"
        f'<p class="meta">{meta}</p>'
        f'<p class="shrunk">{shrunk_note(results)}</p>\n'
        f'{body}\n<p class="meta">{html.escape(colocation.SIMULATED_NOTE)}.</p>'
        "</body></html>\n"
    )
