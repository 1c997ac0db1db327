"""The figures: what they plot, not how they look (the browser test checks they render)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.image import imread

from arkgpu.bench.plots import binned, plot_allocation, plot_unallocated_bars


def test_binned_means_ignore_nan_and_keep_empty_bins_nan() -> None:
    """Rows are averaged in bins of k; NaN (no request finished) does not count."""
    values = np.array([[1.0, np.nan], [3.0, np.nan], [5.0, 2.0], [7.0, np.nan], [9.0, 1.0]])
    out = binned(values, 2)
    assert out.shape == (2, 2)  # the fifth row does not fill a bin
    assert out[:, 0].tolist() == [2.0, 6.0]
    assert np.isnan(out[0, 1])
    assert out[1, 1] == 2.0


def test_allocation_plot_and_bars_write_pngs(tmp_path: Path) -> None:
    """Both placement figures are written as real PNG images."""
    curve = [min(float(x), 95.0) for x in range(131)]
    plot_allocation(tmp_path / "c.png", "t", {"fgd": curve}, {"fgd": curve})
    plot_unallocated_bars(tmp_path / "b.png", "t", {"fgd": (5.0, 0.1)}, {"fgd": (4.8, 0.1)}, 3.0)
    for name in ("c.png", "b.png"):
        image = imread(tmp_path / name)
        assert image.shape[0] > 300
        assert image.shape[1] > 600
        assert image.std() > 0.05  # not a blank canvas
