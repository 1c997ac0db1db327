"""Plots of bench results (matplotlib, files only, no display).

Every figure answers one question and says in its title whether its figures
are simulated. Each function writes a PNG and returns nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from arkgpu.sim.colocation.metrics import Series

DPI = 110
"""Resolution of every PNG (dots per inch): sharp on screen, a few hundred kB at most."""


def _colors() -> list[str]:
    return list(rcParams["axes.prop_cycle"].by_key()["color"])


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)


def plot_allocation(
    path: Path,
    title: str,
    ours: Mapping[str, Sequence[float]],
    published: Mapping[str, Sequence[float]],
) -> None:
    """Unallocated GPU % against arrived %: ours solid, FGD's published dashed, 100% marked.

    ``ours`` and ``published`` hold GPU allocation % at 0..130% arrived; the plot
    shows 100 minus it, so the figure of merit is read off at the marked 100%.
    """
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    colors = _colors()
    for i, (name, curve) in enumerate(ours.items()):
        color = colors[i % len(colors)]
        unallocated = 100.0 - np.asarray(curve, dtype=float)
        ax.plot(range(len(curve)), unallocated, color=color, label=name)
        if len(curve) > 100:
            ax.plot([100], [unallocated[100]], "o", color=color, markersize=5)
        if name in published:
            ax.plot(
                range(131), 100.0 - np.asarray(published[name]), color=color, ls="--", alpha=0.6
            )
    ax.axvline(100, color="black", lw=0.8, ls=":")
    ax.annotate("100% arrived", (100, 1), xytext=(3, 0), textcoords="offset points", fontsize=8)
    handles, _ = ax.get_legend_handles_labels()
    style = [
        Line2D([], [], color="grey", label="ours (simulated)"),
        Line2D([], [], color="grey", ls="--", label="FGD published"),
    ]
    ax.legend(handles=[*handles, *style], fontsize=8, ncol=2)
    ax.set(
        xlabel="arrived GPU requests, % of capacity",
        ylabel="unallocated GPUs, % of capacity (lower is better)",
        title=title,
        xlim=(70, 130),
        ylim=(0, 30),
    )
    ax.grid(alpha=0.3)
    _save(fig, path)


def plot_unallocated_bars(
    path: Path,
    title: str,
    ours: Mapping[str, tuple[float, float]],
    published: Mapping[str, tuple[float, float]],
    lp_bound: float | None,
) -> None:
    """Unallocated GPU % at 100% arrived per policy: ours (mean, sd) beside FGD's, LP bound.

    Bars are labelled with their value; the LP bound (no online policy can do
    better on that arrival order) is a horizontal line.
    """
    fig = Figure(figsize=(8, 4.2))
    ax = fig.subplots()
    x = np.arange(len(ours))
    means = [m for m, _ in ours.values()]
    bars = ax.bar(x - 0.2, means, 0.4, yerr=[s for _, s in ours.values()], label="ours (simulated)")
    ax.bar_label(bars, fmt="%.2f", fontsize=8, padding=2)
    names = list(ours)
    pub_x = [i + 0.2 for i, n in enumerate(names) if n in published]
    pub = [published[n] for n in names if n in published]
    if pub:
        pub_bars = ax.bar(
            pub_x, [m for m, _ in pub], 0.4, yerr=[s for _, s in pub], color="#bbbbbb",
            hatch="//", label="FGD published",
        )  # fmt: skip
        ax.bar_label(pub_bars, fmt="%.2f", fontsize=8, padding=2)
    if lp_bound is not None:
        ax.axhline(lp_bound, color="black", ls="--", lw=1, label=f"LP bound {lp_bound:.2f}")
    ax.set_xticks(x, names)
    ax.set(ylabel="unallocated GPUs at 100% arrived, %\n(lower is better)", title=title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


COLOCATION_PANELS = (
    ("normalized_goodput", "normalised goodput\n(higher is better)"),
    ("slo_attainment_min_pct", "worst service's SLO attainment, %\n(higher is better)"),
    ("be_throughput_norm", "BE throughput, whole GPUs' worth\n(higher is better)"),
)
"""The co-location comparison's panels: metric key of the bench document, axis label."""


def plot_colocation_modes(path: Path, title: str, modes: Mapping[str, Mapping[str, Any]]) -> None:
    """One bar per sharing mode for each metric of :data:`COLOCATION_PANELS`; arkgpu highlighted."""
    fig = Figure(figsize=(11, 3.8))
    axes = fig.subplots(1, len(COLOCATION_PANELS))
    names = list(modes)
    colors = ["#d62728" if n == "arkgpu" else "#7f7f7f" for n in names]
    for ax, (key, label) in zip(axes, COLOCATION_PANELS, strict=True):
        values = [float(modes[n][key]) for n in names]
        bars = ax.bar(range(len(names)), values, color=colors)
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=1)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(label, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        if key == "slo_attainment_min_pct":
            ax.set_ylim(max(0.0, min(values) - 5), 100.5)  # near 100%: differences visible
    fig.suptitle(title, fontsize=10)
    _save(fig, path)


SERIES_POINTS = 160
"""Points per line in the time series: periods are averaged in bins to about this many."""


def binned(values: np.ndarray, k: int) -> np.ndarray:
    """Means over bins of ``k`` consecutive rows, NaN ignored (NaN where a bin has none)."""
    rows = (len(values) // k) * k
    shaped = values[:rows].reshape(rows // k, k, *values.shape[1:])
    counts = np.sum(~np.isnan(shaped), axis=1)
    sums = np.nansum(shaped, axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def plot_series(path: Path, title: str, series: Series) -> None:
    """The arkgpu run over time: LC load, LC and BE compute shares, period p99 over target.

    Periods are averaged in bins (:data:`SERIES_POINTS` per line) so that the
    daily pattern shows through the period-to-period noise.
    """
    k = max(1, len(series.t) // SERIES_POINTS)
    fig = Figure(figsize=(10, 8.5))
    load_ax, lc_ax, be_ax, p99_ax = fig.subplots(4, 1, sharex=True)
    minutes = binned(series.t, k) / 60.0
    ratio = binned(series.lc_p99_ms / series.lc_target_ms[None, :], k)
    load, lc_share = binned(series.lc_load_rps, k), binned(series.lc_share, k)
    for i, name in enumerate(series.lc_names):
        load_ax.plot(minutes, load[:, i], lw=0.9, label=name)
        lc_ax.plot(minutes, lc_share[:, i], lw=0.9, label=name)
        p99_ax.plot(minutes, ratio[:, i], lw=0.9)
    be_share = binned(series.be_share, k)
    for j, name in enumerate(series.be_names):
        be_ax.plot(minutes, be_share[:, j], lw=0.9, label=name)
    p99_ax.axhline(1.0, color="black", ls="--", lw=1)
    p99_ax.annotate("target", (0, 1.0), xytext=(2, 3), textcoords="offset points", fontsize=8)
    _label(load_ax, "LC load, requests/s")
    _label(lc_ax, "LC compute share")
    _label(be_ax, "BE compute share")
    p99_ax.set_ylabel("period p99 / target\n(below 1 is met)")
    p99_ax.set_xlabel(f"simulated time, min (each point: mean of {k} control periods)")
    fig.suptitle(title, fontsize=10)
    _save(fig, path)


def _label(ax: Axes, ylabel: str) -> None:
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, ncol=3, loc="upper right")
    ax.grid(alpha=0.3)


def plot_limiter_shares(path: Path, title: str, cases: Sequence[Mapping[str, float]]) -> None:
    """Achieved busy share against the share set, alone and beside a co-runner; ideal line."""
    fig = Figure(figsize=(6, 4.5))
    ax = fig.subplots()
    shares = [c["share_pct"] for c in cases]
    ax.plot([0, 100], [0, 100], color="grey", lw=0.8, ls="--", label="ideal (achieved = set)")
    ax.plot(shares, [c["alone_pct"] for c in cases], "o", label="alone")
    ax.plot(shares, [c["beside_pct"] for c in cases], "s", label="beside a busy co-runner")
    ax.plot(
        [c["corunner_share_pct"] for c in cases],
        [c["corunner_pct"] for c in cases],
        "^",
        label="the co-runner (set to the rest)",
    )
    ax.set(
        xlabel="compute share set, %", ylabel="busy share achieved, %", title=title,
        xlim=(0, 100), ylim=(0, 100),
    )  # fmt: skip
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(fig, path)
