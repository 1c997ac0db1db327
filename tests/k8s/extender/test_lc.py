"""LC pods go through the predictor's check (as the co-location simulator's arkgpu mode):
bound with the predicted share, refused where an LC target would be missed, with the reason."""

from __future__ import annotations

import pytest

from arkgpu.k8s.cluster.objects import read_node, read_pod
from arkgpu.k8s.extender.config import ExtenderConfig
from arkgpu.k8s.extender.running import build_scheduler
from arkgpu.k8s.extender.state import ClusterView

from .helpers import node, pod

LIMITS = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10", "nvidia.com/gpumem": "4096"}


def _lc(name: str, rps: int) -> dict[str, object]:
    notes = {
        "arkgpu.io/qos": "lc",
        "arkgpu.io/model": "resnet50",
        "arkgpu.io/latency-target-ms": "30",
        "arkgpu.io/peak-rps": str(rps),
    }
    return pod(name, LIMITS, notes)


def test_lc_pods_are_sized_and_refused_by_the_predictor() -> None:
    view = ClusterView(build_scheduler(ExtenderConfig(lc_check=True)), "arkgpu-scheduler", 0)
    view.node_seen(read_node(node("a", 1)))
    first = read_pod(_lc("first", 400))
    assert list(view.verdicts(first, ["a"]).fits) == ["a"]
    placed = view.assign(first, "a")
    share = placed.assignment.gpus[0].share_bp
    assert share > 1000  # the predicted share at 400 rps, not the 10% gpucores asked
    assert placed.assignment.qos == "lc"
    second = read_pod(_lc("second", 800))
    verdicts = view.verdicts(second, ["a"])
    assert verdicts.fits == {}
    assert "node a: GPU 0: LC shares at peak add up to" in verdicts.failed["a"]
    be = read_pod(pod("be", LIMITS))
    assert list(view.verdicts(be, ["a"]).fits) == ["a"]  # a BE pod is not checked


def test_a_model_the_predictor_lacks_is_refused_with_its_name() -> None:
    view = ClusterView(build_scheduler(ExtenderConfig(lc_check=True)), "arkgpu-scheduler", 0)
    view.node_seen(read_node(node("a", 1)))
    odd = _lc("odd", 10)
    odd["metadata"]["annotations"]["arkgpu.io/model"] = "nosuchnet"  # type: ignore[index]
    with pytest.raises(ValueError, match="nosuchnet"):
        view.verdicts(read_pod(odd), ["a"])
