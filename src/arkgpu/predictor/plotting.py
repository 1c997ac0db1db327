"""Figures of the predictor: latency against share, and held-out errors of an evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.predictor.predicting import Predictor
from arkgpu.predictor.splitting import seeds_label
from arkgpu.traces.profiles import SoloRecord

PLOT_POINTS = 200
"""Shares drawn between the smallest share and the whole GPU."""
MIN_SHARE = 0.05
"""Left end of the share axis (5%: below MPS's useful range)."""


def share_table(
    predictor: Predictor, model: str, batch: int, gpu: str, shares: Sequence[float]
) -> list[tuple[float, float, float, float]]:
    """Rows (share, latency ms, throughput /s, training iteration ms) at ``shares``."""
    rows = []
    for share in shares:
        latency = predictor.latency_ms(model, batch, share, gpu)
        training = predictor.training_iteration_ms(model, batch, share, gpu)
        rows.append((share, latency, 1000.0 * batch / latency, training))
    return rows


def plot_latency_vs_share(
    predictor: Predictor,
    model: str,
    batch: int,
    gpu: str,
    out: Path | str,
    *,
    measured: Sequence[SoloRecord] = (),
) -> None:
    """Write a PNG of predicted latency against share, with measured points if given."""
    import matplotlib  # noqa: PLC0415 (heavy; only the commands that draw pay for it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    shares = np.linspace(MIN_SHARE, 1.0, PLOT_POINTS)
    latency = predictor.latency_ms_many(model, np.full(shares.shape, float(batch)), shares, gpu)
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(shares * 100, latency, label=f"predicted (level 1), batch {batch}")
    points = [r for r in measured if r.model == model and r.batch == batch and r.gpu == gpu]
    if points:
        axes.scatter(
            [r.share * 100 for r in points],
            [r.latency_ms for r in points],
            color="black",
            zorder=3,
            label="measured",
        )
    axes.set_xlabel("compute share of the GPU (%)")
    axes.set_ylabel("latency of one batch (ms)")
    axes.set_title(f"{model} on {gpu}")
    axes.set_ylim(bottom=0)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)


def plot_evaluation(report: dict[str, Any], out: Path | str) -> None:
    """Write a bar chart of MAPE and p90 APE per predictor (ours and baselines) per level."""
    import matplotlib  # noqa: PLC0415 (heavy; only the commands that draw pay for it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    names, mape, p90 = [], [], []
    for level, ours in (("level1", "arkgpu formula"), ("level2", "arkgpu contention")):
        rows = [(ours, report[level]), *report["baselines"][level].items()]
        for name, summary in rows:
            if summary["mape_pct"] is not None:
                names.append(f"L{level[-1]} {name}")
                mape.append(summary["mape_pct"])
                p90.append(summary["p90_ape_pct"])
    figure, axes = plt.subplots(figsize=(7, 4))
    x = np.arange(len(names))
    axes.bar(x - 0.2, mape, width=0.4, label="MAPE")
    axes.bar(x + 0.2, p90, width=0.4, label="p90 APE")
    axes.set_xticks(x, names, rotation=30, ha="right")
    axes.set_ylabel("held-out error (%)")
    seeds = seeds_label(int(report["seed"]), int(report.get("repeats", 1)))
    axes.set_title(f"split {report['split']}, {seeds} (measured profiles)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
