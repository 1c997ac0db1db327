"""Figures of the predictor: latency against share for one model and batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arkgpu.predictor.predicting import Predictor
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
