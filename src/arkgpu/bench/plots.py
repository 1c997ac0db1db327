"""Plots of bench results (matplotlib, files only, no display)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib import rcParams
from matplotlib.figure import Figure


def plot_allocation(
    path: Path,
    title: str,
    ours: Mapping[str, Sequence[float]],
    published: Mapping[str, Sequence[float]],
) -> None:
    """Allocation % against arrived % of capacity: ours solid, FGD's published dashed."""
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, curve) in enumerate(ours.items()):
        color = colors[i % len(colors)]
        ax.plot(range(len(curve)), curve, color=color, label=f"{name} (ours)")
        if name in published:
            ax.plot(
                range(131),
                published[name],
                color=color,
                linestyle="--",
                alpha=0.6,
                label=f"{name} (FGD published)",
            )
    ax.plot([0, 130], [0, 130], color="grey", linewidth=0.5)
    ax.set(
        xlabel="arrived GPU requests, % of capacity",
        ylabel="GPU allocation, % of capacity",
        title=title,
        xlim=(60, 130),
        ylim=(60, 100),
    )
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
