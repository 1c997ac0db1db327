"""LC pods go through the predictor's check (as the co-location simulator's arkgpu mode):
bound with the predicted share, refused where an LC target would be missed, with the reason."""

from __future__ import annotations

from dataclasses import replace

import pytest

from arkgpu.k8s.cluster.objects import read_node, read_pod
from arkgpu.k8s.contract import ANNOTATION_INVENTORY, NodeInventory
from arkgpu.k8s.extender.config import ExtenderConfig
from arkgpu.k8s.extender.running import build_scheduler, lc_sizers
from arkgpu.k8s.extender.state import ClusterView
from arkgpu.k8s.inventory import Corrections

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


def _calibrated(name: str, factor: float) -> dict[str, object]:
    """Node ``name`` (one GPU) whose node runtime published a correction for resnet50."""
    obj = node(name, 1)
    notes = obj["metadata"]["annotations"]
    inventory = NodeInventory.from_json(notes[ANNOTATION_INVENTORY])
    notes[ANNOTATION_INVENTORY] = replace(inventory, corrections=(("resnet50", factor),)).to_json()
    return obj


def test_lc_pods_are_sized_with_the_corrections_the_nodes_published() -> None:
    """A node reporting resnet50 1.6x slower than predicted: an LC pod of that model gets a
    larger share, on every node (the largest factor of a model is what a new pod assumes);
    the correction withdrawn, the plain size again."""
    rps = 300
    config = ExtenderConfig(lc_check=True)
    sizers = lc_sizers(config)
    view = ClusterView(build_scheduler(config, sizers=sizers), "arkgpu-scheduler", 0, sizers)
    view.node_seen(read_node(node("a", 1)))
    plain = view.assign(read_pod(_lc("plain", rps)), "a").assignment.gpus[0].share_bp
    view.node_seen(read_node(node("b", 1)))
    version = view.version
    view.node_seen(read_node(_calibrated("c", 1.6)))
    published: Corrections = (("resnet50", 1.6),)
    assert view.corrections == published
    assert view.version > version + 1  # the node joined, and the check changed
    sized = view.assign(read_pod(_lc("sized", rps)), "b").assignment.gpus[0].share_bp
    assert sized > plain * 1.2, (plain, sized)
    view.node_seen(read_node(node("c", 1)))  # the runtime's correction withdrawn
    withdrawn: Corrections = ()
    assert view.corrections == withdrawn
    again = view.assign(read_pod(_lc("again", rps)), "c").assignment.gpus[0].share_bp
    assert again == plain
    # a relist: b and c (with LC pods placed before and after the change) are gone, which
    # releases their pods from the same check that placed them
    view.replace_nodes([read_node(_calibrated("d", 1.3)), read_node(node("a", 1))])
    relisted: Corrections = (("resnet50", 1.3),)
    assert view.corrections == relisted
