"""The pod examples of docs/INSTALL.md speak the contract: HAMi's resources, arkgpu.io annotations.

The API server's strict validation of the same files is in tests/e2e/test_chart.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from arkgpu.k8s import contract, gpu_requests

from .helm import REPO

EXAMPLES = sorted((REPO / "deploy" / "examples").glob("*.yaml"))
ANNOTATIONS = {
    contract.ANNOTATION_QOS,
    contract.ANNOTATION_LATENCY_TARGET_MS,
    contract.ANNOTATION_MODEL,
    contract.ANNOTATION_MAX_BATCH,
    contract.ANNOTATION_PEAK_RPS,
}


def pod_template(doc: dict[str, Any]) -> dict[str, Any]:
    """The pod of a Pod, or the pod template of a workload."""
    return doc if doc["kind"] == "Pod" else dict(doc["spec"]["template"])


def test_both_examples_exist() -> None:
    assert [p.name for p in EXAMPLES] == ["be-training.yaml", "lc-inference.yaml"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_asks_with_the_contracts_names(path: Path) -> None:
    (doc,) = list(yaml.safe_load_all(path.read_text()))
    pod = pod_template(doc)
    annotations = pod["metadata"]["annotations"]
    ours = {k for k in annotations if k.startswith(f"{contract.GROUP}/")}
    assert ours <= ANNOTATIONS
    assert annotations[contract.ANNOTATION_QOS] in contract.QOS_CLASSES
    assert "schedulerName" not in pod["spec"]  # the webhook sets it
    for c in pod["spec"]["containers"]:
        limits = {k: str(v) for k, v in c["resources"]["limits"].items()}
        request = gpu_requests.gpu_request(limits, f"{path.name} container {c['name']}")
        assert request.count == 1
        assert request.cores_percent is not None


def test_lc_example_has_what_the_predictor_needs() -> None:
    (doc,) = yaml.safe_load_all((REPO / "deploy" / "examples" / "lc-inference.yaml").read_text())
    annotations = doc["metadata"]["annotations"]
    assert annotations[contract.ANNOTATION_QOS] == contract.QOS_LC
    for key in (contract.ANNOTATION_LATENCY_TARGET_MS, contract.ANNOTATION_MAX_BATCH):
        assert int(annotations[key]) > 0
    assert annotations[contract.ANNOTATION_MODEL] == "resnet50"
