"""The node demo's figure: shares, LC p99 against target, BE throughput over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from arkgpu.node.demo import DemoConfig, DemoRun, phase_bounds


def plot_demo(config: DemoConfig, run: DemoRun, path: Path) -> None:
    """Draw the run as a PNG at ``path`` (three panels over time)."""
    from matplotlib.figure import Figure  # noqa: PLC0415 (the [plots] extra)

    fig = Figure(figsize=(8, 7))
    ax_share, ax_p99, ax_be = fig.subplots(3, 1, sharex=True)
    t = np.array([s["t"] for s in run.samples])
    for key, label in (("lc_bp", "LC share"), ("be_bp", "BE share"), ("lent_bp", "lent to BE")):
        ax_share.step(t, [s[key] / 100 for s in run.samples], where="post", label=label)
    ax_share.set_ylabel("share written (%)")
    ax_share.legend(loc="upper right", fontsize=8)
    w = config.window_s
    edges = np.arange(0.0, config.total_s, w / 2)
    p99 = [_p99(run, e, e + w) for e in edges]
    ax_p99.plot(edges + w, p99, label="LC p99 (trailing window)")
    ax_p99.axhline(config.target_ms, color="red", linestyle="--", label="target")
    ax_p99.set_ylabel("ms")
    ax_p99.legend(loc="upper right", fontsize=8)
    be = np.array([s["be_busy_s"] for s in run.samples])
    lc = np.array([s["lc_busy_s"] for s in run.samples])
    dt = np.maximum(np.diff(t), 1e-6)
    ax_be.plot(t[1:], np.diff(be) / dt * 100, label="BE busy")
    ax_be.plot(t[1:], np.diff(lc) / dt * 100, label="LC busy")
    ax_be.set_ylabel("busy share (%)")
    ax_be.set_xlabel("time since the LC load started (s)")
    ax_be.legend(loc="upper right", fontsize=8)
    for start, _ in phase_bounds(config).values():
        for ax in (ax_share, ax_p99, ax_be):
            ax.axvline(start, color="grey", linewidth=0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _p99(run: DemoRun, start: float, end: float) -> float:
    lat = [lat for t, lat in run.latencies if start <= t < end]
    return float(np.percentile(lat, 99)) * 1000.0 if lat else float("nan")
