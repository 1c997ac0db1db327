"""The HAMi compatibility contract on the real control plane: a pod per row.

Every row of :data:`arkgpu.k8s.hami_compat.ROWS` is tried as a migrating user would:
the example pod of :mod:`.hami_pods` is created through the real kube-apiserver, whose
webhook (``arkgpu webhook run`` with the chart's defaults) mutates and validates it; an
admitted pod is scheduled by the real kube-scheduler calling ``arkgpu extender run``, on a
Node object whose inventory annotation names two 8 GiB fake GPUs ``GPU-fake-0/1`` as the
device plugin writes it. What is checked per behaviour:

- refused: the API server's whole message, as kubectl prints it;
- warned: the AdmissionReview warning in the API server's ``Warning`` header, and the pod
  is placed;
- same / different: where the pod lands (its assignment). The limits its container gets
  are checked on the real node, where the pod runs:
  ``test_real_node_flow.py::test_each_supported_hami_row_runs_under_the_limits_the_contract_says``.

A pod that cannot be placed has a FailedScheduling event whose text is the pod
condition's, whole (kube-scheduler formats the event with the reason as format string).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from arkgpu.k8s import contract
from arkgpu.k8s import hami_compat as hc

from .controlplane import ExtenderPlane
from .extender_helpers import GROUP_LABEL, ExtenderProcess
from .hami_pods import example, placed_rows, row_id, rows
from .kube_types import body as json_body
from .kube_types import filled, loaded, raw
from .nodes import create_gpu_node, wait_for
from .webhook_helpers import refusal, registered, running_webhook

BIND_TIMEOUT_S = 120.0
"""One pod through scheduler, extender and bind on a loaded 2-core machine (a retry after
the previous pod's release included)."""
DENIED = 'admission webhook "validate.arkgpu.io" denied the request: '
DELETE_WAIT_S = 60.0
"""Bound for a pod deleted with grace 0 to leave the API server (no kubelet runs here)."""
GPU_MIB = 8192
"""Memory of each of the node's two fake GPUs here."""
FAKE_MODEL = "ArkGPU Fake GPU"
"""The fake NVML's product name (the use-gputype example asks for ``fake``)."""


@dataclass(frozen=True)
class Cluster:
    """The module's namespace, node and node-side emulator."""

    api: k8s.ApiClient
    namespace: str
    node: str
    group: str


@pytest.fixture(scope="module")
def cluster(
    extender_plane: ExtenderPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Webhook (chart defaults) and extender for one fresh node with two fake GPUs."""
    with ExitStack() as stack:
        api = stack.enter_context(extender_plane.plane.api_client())
        core = k8s.CoreV1Api(api)
        group = uuid.uuid4().hex[:8]
        namespace, node = f"hami-{group}", f"hami-{group}"
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
        core.create_namespaced_service_account(
            namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
        )
        create_gpu_node(api, node, gpus=20)
        gpus = tuple(contract.InventoryGpu(i, f"GPU-fake-{i}", FAKE_MODEL, GPU_MIB) for i in (0, 1))
        notes = {contract.ANNOTATION_INVENTORY: contract.NodeInventory(gpus).to_json()}
        core.patch_node(node, {"metadata": {"labels": {GROUP_LABEL: group}, "annotations": notes}})
        hook = stack.enter_context(
            running_webhook(extender_plane.plane, Path(tmp_path_factory.mktemp("hami-webhook")))
        )
        stack.enter_context(registered(api, hook, namespace))
        extender = ExtenderProcess(extender_plane)
        extender.start()
        stack.callback(extender.kill)
        yield Cluster(api, namespace, node, group)


def _body(row: hc.Row, name: str, group: str) -> dict[str, Any]:
    body = example(row).pod(name)
    body["spec"]["nodeSelector"] = {GROUP_LABEL: group}
    return body


def _name(row: hc.Row) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", row_id(row).lower()).strip("-")[:40].strip("-")
    return f"{slug}-{uuid.uuid4().hex[:5]}"


def _expected_refusal(row: hc.Row) -> str:
    """The whole sentence the user reads for a refused row."""
    if row.kind is hc.Kind.ANNOTATION:
        return row.arkgpu
    if row.field.startswith(hc.RESOURCE_MIG_PREFIX):
        (resource,) = example(row).limits
        return f"container 'main': {resource}: {row.arkgpu}"
    return f"container 'main': {row.arkgpu}"


@pytest.mark.parametrize("row", rows(hc.Behaviour.REFUSED), ids=row_id)
def test_refused_rows_are_refused_at_creation_with_the_whole_reason(
    cluster: Cluster, row: hc.Row
) -> None:
    body = _body(row, _name(row), cluster.group)
    assert refusal(cluster.api, cluster.namespace, body) == DENIED + _expected_refusal(row)


def _create(cluster: Cluster, body: dict[str, Any]) -> list[str]:
    """Create the pod; the API server's warnings (kubectl prints them)."""
    answer = raw(
        k8s.CoreV1Api(cluster.api).create_namespaced_pod(
            cluster.namespace, json_body(body), _preload_content=False
        )
    )
    headers = answer.headers.getlist("Warning") if hasattr(answer.headers, "getlist") else []
    answer.release_conn()
    return [re.sub(r'^299 - "(.*)"$', r"\1", h).replace('\\"', '"') for h in headers]


def _bound(cluster: Cluster, name: str) -> dict[str, Any]:
    core = k8s.CoreV1Api(cluster.api)

    def probe() -> dict[str, Any] | None:
        pod: dict[str, Any] = loaded(
            core.read_namespaced_pod(name, cluster.namespace, _preload_content=False)
        )
        return pod if pod["spec"].get("nodeName") else None

    try:
        return wait_for(probe, BIND_TIMEOUT_S, f"{name} bound", poll_s=0.5)
    except AssertionError as exc:
        said = _events(cluster, name)
        raise AssertionError(f"{exc}; events: {said}") from None


def _events(cluster: Cluster, name: str) -> list[str]:
    items = (
        k8s.CoreV1Api(cluster.api)
        .list_namespaced_event(cluster.namespace, field_selector=f"involvedObject.name={name}")
        .items
    )
    return [f"{e.reason}: {e.message}" for e in items]


def _delete(cluster: Cluster, name: str) -> None:
    core = k8s.CoreV1Api(cluster.api)
    core.delete_namespaced_pod(name, cluster.namespace, grace_period_seconds=0)

    def gone() -> bool | None:
        names = [filled(p.metadata).name for p in core.list_namespaced_pod(cluster.namespace).items]
        return True if name not in names else None

    wait_for(gone, DELETE_WAIT_S, f"{name} deleted")


@pytest.mark.parametrize("row", rows(hc.Behaviour.WARNED), ids=row_id)
def test_warned_rows_are_admitted_with_the_warning_and_placed(
    cluster: Cluster, row: hc.Row
) -> None:
    name = _name(row)
    warnings = _create(cluster, _body(row, name, cluster.group))
    try:
        assert len(warnings) == 1, warnings
        assert row.arkgpu in warnings[0]
        assert _bound(cluster, name)["spec"]["nodeName"] == cluster.node
    finally:
        _delete(cluster, name)


def test_every_supported_row_has_its_expected_placement() -> None:
    assert {(r.field, r.value) for r in rows(hc.Behaviour.SAME, hc.Behaviour.DIFFERENT)} == set(
        placed_rows(GPU_MIB)
    )


@pytest.mark.parametrize("row", rows(hc.Behaviour.SAME, hc.Behaviour.DIFFERENT), ids=row_id)
def test_supported_rows_are_placed_and_limited_as_the_contract_says(
    cluster: Cluster, row: hc.Row
) -> None:
    name = _name(row)
    assert _create(cluster, _body(row, name, cluster.group)) == []
    try:
        pod = _bound(cluster, name)
        gpus, _ = placed_rows(GPU_MIB)[(row.field, row.value)]
        stored = pod["spec"]["containers"][0]["resources"]["limits"]
        assert hc.RESOURCE_PRIORITY not in stored  # removed (row priority 1), never added
        assert contract.ANNOTATION_QOS not in pod["metadata"]["annotations"]  # no class added
        placed = json.loads(pod["metadata"]["annotations"][contract.ANNOTATION_ASSIGNMENT])
        got = [(g["uuid"], g["share_bp"], g["memory_mib"]) for g in placed["gpus"]]
        want = [(u or got[0][0], s, m) for u, s, m in gpus]
        assert got == want
    finally:
        _delete(cluster, name)


# Pods admitted that fit no node: what they ask, and the sentence their event must carry
# (its text with {ns}, {name} and {node} filled in, then a regular expression for the rest).
PENDING: dict[str, tuple[dict[str, str], dict[str, str], str, str]] = {
    "uuid": (
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10"},
        {hc.ANNOTATION_USE_GPUUUID: "GPU-%d-nowhere"},
        "node {node} has 0 GPUs the pod's selection admits, it asks for 1 "
        "(nvidia.com/use-gpuuuid is 'GPU-\uff05d-nowhere'): name GPUs of this node in "
        "nvidia.com/use-gpuuuid or remove the annotation",
        "",
    ),
    "type": (
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10"},
        {contract.ANNOTATION_USE_GPUTYPE: "H100"},
        "pod {ns}/{name}: no GPU model of the cluster matches the pod's type annotations "
        "(nvidia.com/use-gputype is 'H100'); the models here: ",
        r"\S",
    ),
    "room": (
        {"nvidia.com/gpu": "3"},
        {},
        "node {node} has ",
        r"\d GPUs with 1000 milli-GPU left, the pod asks for 3",
    ),
    "lc-model": (
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10"},
        {contract.ANNOTATION_QOS: "lc"},
        "pod {ns}/{name}: arkgpu.io/model: required for an lc pod",
        "",
    ),
}


@pytest.mark.parametrize("case", sorted(PENDING))
def test_a_pod_that_fits_nowhere_says_why_in_its_events_intact(cluster: Cluster, case: str) -> None:
    """The pod stays Pending with a FailedScheduling event that is the pod condition's text
    whole, the extender's sentence in it (a percent sign shown as U+FF05, never mangled into
    a format verb)."""
    limits, notes, text, rest = PENDING[case]
    name = f"pending-{case}-{uuid.uuid4().hex[:5]}"
    body = {
        "metadata": {"name": name, "annotations": dict(notes)},
        "spec": {
            "nodeSelector": {GROUP_LABEL: cluster.group},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/arkgpu-e2e:never-pulled",
                    "resources": {"limits": limits},
                }
            ],
        },
    }
    assert _create(cluster, body) == []
    core = k8s.CoreV1Api(cluster.api)
    try:

        def event() -> str | None:
            said = [m for m in _events(cluster, name) if m.startswith("FailedScheduling: ")]
            return said[0].removeprefix("FailedScheduling: ") if said else None

        def condition() -> Any:
            pod = core.read_namespaced_pod(name, cluster.namespace)
            found = [c for c in filled(pod.status).conditions or [] if c.type == "PodScheduled"]
            return found[0] if found else None

        message = wait_for(event, BIND_TIMEOUT_S, f"FailedScheduling of {name}")
        # kube-scheduler records the event and patches the condition separately: wait for both.
        scheduled = wait_for(condition, BIND_TIMEOUT_S, f"PodScheduled condition of {name}")
        assert message == scheduled.message
        assert "%" not in message
        said = text.format(ns=cluster.namespace, name=name, node=cluster.node)
        assert re.search(re.escape(said) + rest, message), (said, rest, message)
    finally:
        _delete(cluster, name)
