"""Results of every demo part, made up in the shapes the benches produce (fast to build).

The numbers are plausible, not measured: the tests that use them check the
page and the figures, not the benches (those have their own tests).
"""

from __future__ import annotations

import numpy as np

from arkgpu.bench.report import DemoConfig, DemoResults
from arkgpu.sim.colocation.metrics import RunResult, Series

POLICIES = {"random": 13.7, "bestfit": 7.4, "fgd": 5.1, "arkgpu": 3.8}
"""Policy -> unallocated GPU % at 100% arrived."""
MODES = {"k8s-native": (2.0, 100.0, 0.0), "mps": (6.5, 97.0, 1.6), "arkgpu": (8.1, 99.0, 2.1)}
"""Mode -> (normalised goodput, worst SLO attainment %, BE throughput)."""


def _curve(unallocated_at_100: float) -> list[float]:
    """Allocation % at 0..130% arrived: all placed until 90%, then flattening."""
    x = np.arange(131, dtype=float)
    top = 100.0 - unallocated_at_100
    curve: list[float] = np.minimum(x, 90 + (top - 90) * np.clip((x - 90) / 10, 0, 1.3)).tolist()
    return curve


def placement_doc() -> dict[str, object]:
    """A placement bench document."""
    policies = {
        name: {
            "unallocated_gpu_pct_at_100": value,
            "sd": 0.2,
            "allocation_pct_mean": _curve(value),
            "published_mean": None,
            "published_sd": None,
        }
        for name, value in POLICIES.items()
    }
    return {"trace": "openb_pod_list_default", "seeds": [42, 43], "policies": policies}


def colocation_doc() -> dict[str, object]:
    """A co-location bench document with three modes."""
    modes = {
        name: {
            "normalized_goodput": goodput,
            "slo_attainment_min_pct": slo,
            "be_throughput_norm": be,
        }
        for name, (goodput, slo, be) in MODES.items()
    }
    return {"scenario": "demo", "seeds": [1], "modes": modes, "ratio_details": {}}


def arkgpu_run() -> RunResult:
    """An arkgpu run of 480 s with two LC services and one BE job."""
    t = np.arange(1.0, 481.0)
    load = np.stack([500 + 400 * np.sin(t / 76), 300 + 200 * np.cos(t / 76)], axis=1)
    share = load / 1200
    series = Series(
        t=t,
        lc_names=("alexnet", "resnet50"),
        lc_load_rps=load,
        lc_share=share,
        lc_p99_ms=np.stack([6 + 2 * share[:, 0], 18 + 4 * share[:, 1]], axis=1),
        lc_target_ms=np.array([10.0, 25.0]),
        be_names=("train-vgg19",),
        be_share=(1 - share.sum(axis=1))[:, None],
        be_rate=np.ones((len(t), 1)),
    )
    return RunResult(
        scenario="demo", mode="arkgpu", seed=1, duration_s=480.0, gpus=4, lcs=(), bes=(),
        gpu_util_pct=90.0, gpus_used=4, events=1, wall_s=1.0, cpu_s=1.0, series=series,
    )  # fmt: skip


def limiter_report() -> dict[str, object]:
    """A limiter bench report with five share cases."""
    cases = [
        {
            "share_pct": s,
            "alone_pct": s + 0.3,
            "beside_pct": s - 0.8,
            "corunner_share_pct": 100 - s,
            "corunner_pct": 100 - s - 0.5,
        }
        for s in (10.0, 30.0, 50.0, 70.0, 90.0)
    ]
    return {"share_cases": cases, "share_error_pts_max": 0.8}


def synthetic_results() -> DemoResults:
    """Every part present, as after a full ``arkgpu demo``."""
    return DemoResults(
        config=DemoConfig(),
        placement=placement_doc(),
        lp_bound_pct=3.07,
        colocation=colocation_doc(),
        arkgpu_run=arkgpu_run(),
        limiter=limiter_report(),
        wall_s={"placement": 40.0, "colocation": 50.0, "limiter": 10.0},
    )
