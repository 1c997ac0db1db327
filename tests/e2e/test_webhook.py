"""The admission webhook, called by the real kube-apiserver: GPU pods mutated, bad pods refused.

``arkgpu webhook run`` runs as a real process with a serving certificate signed
by a CA of the test's own, given to the API server in the webhook
configurations' ``caBundle``. The MutatingWebhookConfiguration and
ValidatingWebhookConfiguration are created through the API (failurePolicy Fail,
sideEffects None, admissionReviewVersions v1), scoped by namespaceSelector to the
test's namespace so no other test's pods reach the webhook, and deleted at the end
(they are cluster-scoped). Pods are then created through the API server: what is
stored, or the error it answers, is what is checked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from arkgpu.k8s import contract

from .controlplane import ControlPlane
from .kube_types import body as json_body
from .kube_types import filled
from .nodes import wait_for
from .webhook_helpers import (
    ACTIVE_TIMEOUT_S,
    Webhook,
    container,
    pod_body,
    refusal,
    registered,
    running_webhook,
)

LARGEST_MIB = 81_920
"""Memory of the test node's GPU (an 80 GB GPU); gpumem over any GPU is asked as 10 TiB."""
HUGE_MIB = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def webhook(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """``arkgpu webhook run`` on a free loopback port, ready (its first node list is in)."""
    with running_webhook(control_plane, tmp_path_factory.mktemp("webhook")) as running:
        yield running


@pytest.fixture(scope="module")
def inventory_node(api: k8s.ApiClient, webhook: Webhook) -> Iterator[str]:
    """A node (not Ready, so nothing lands on it) publishing one 80 GB GPU, created after the
    webhook started: the webhook learns it through its watch."""
    core = k8s.CoreV1Api(api)
    name = f"webhook-inventory-{uuid.uuid4().hex[:8]}"
    gpu = contract.InventoryGpu(0, f"GPU-{uuid.uuid4()}", "NVIDIA A100-SXM4-80GB", LARGEST_MIB)
    annotations = {contract.ANNOTATION_INVENTORY: contract.NodeInventory((gpu,)).to_json()}
    core.create_node(json_body({"metadata": {"name": name, "annotations": annotations}}))
    yield name
    core.delete_node(name)


def test_gpu_pods_are_mutated_and_cpu_pods_untouched(
    api: k8s.ApiClient, webhook: Webhook, namespace: str
) -> None:
    """A HAMi pod is stored with schedulerName arkgpu-scheduler and, with the chart's defaults,
    nothing else added (no class, no cores: it keeps HAMi's meaning);
    gpucores; an LC pod keeps its class; another scheduler is kept; a CPU pod is stored as sent."""
    core = k8s.CoreV1Api(api)
    with registered(api, webhook, namespace):
        hami = core.create_namespaced_pod(
            namespace, json_body(pod_body("hami", container(gpu="1", gpumem="4096")))
        )
        lc = core.create_namespaced_pod(
            namespace,
            json_body(
                pod_body(
                    "lc",
                    container(gpu="1", gpucores="30"),
                    qos="lc",
                    model="resnet50",
                    latency_target_ms="20",
                )
            ),
        )
        other_body = pod_body("other", container(gpu="1"))
        other_body["spec"]["schedulerName"] = "volcano"
        other = core.create_namespaced_pod(namespace, json_body(other_body))
        cpu = core.create_namespaced_pod(namespace, json_body(pod_body("cpu", container(cpu="1"))))
    assert _scheduler(hami) == contract.SCHEDULER_NAME
    assert not filled(hami.metadata).annotations  # the chart's defaults: no class, no cores added
    assert _limits(hami) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "4096",
    }
    assert _scheduler(lc) == contract.SCHEDULER_NAME
    assert filled(filled(lc.metadata).annotations)[contract.ANNOTATION_QOS] == "lc"
    assert filled(_limits(lc))["nvidia.com/gpucores"] == "30"
    assert _scheduler(other) == "volcano"
    assert _scheduler(cpu) == "default-scheduler"
    assert filled(cpu.metadata).annotations is None
    assert _limits(cpu) == {"cpu": "1"}


def _scheduler(pod: k8s.V1Pod) -> str | None:
    return filled(pod.spec).scheduler_name


def _limits(pod: k8s.V1Pod) -> dict[str, str] | None:
    """The first container's limits."""
    return filled(filled(pod.spec).containers[0].resources).limits


BAD_PODS = [
    (
        pod_body("cores", container(gpu="1", gpucores="150")),
        "container 'main': nvidia.com/gpucores is 150, but it is a percentage of one GPU's",
    ),
    (
        pod_body("memory", container(gpu="1", gpumem=str(HUGE_MIB))),
        f"container 'main': nvidia.com/gpumem is {HUGE_MIB} MiB per GPU, more than the largest "
        "GPU in this cluster has (",
    ),
    (
        pod_body("count", container("trainer", gpu="32")),
        "container 'trainer': nvidia.com/gpu is 32, over the 16 GPUs",
    ),
    (
        pod_body("qos", container(gpu="1"), qos="gold"),
        "annotation arkgpu.io/qos: unknown QoS class 'gold': use lc (latency-critical) or be",
    ),
    (
        pod_body("nomodel", container(gpu="1"), qos="lc", latency_target_ms="20"),
        "annotation arkgpu.io/latency-target-ms needs arkgpu.io/model",
    ),
    (
        pod_body("target", container(gpu="1"), model="resnet50", latency_target_ms="fast"),
        "annotation arkgpu.io/latency-target-ms: expected a number above 0 (milliseconds), "
        "got 'fast'",
    ),
    (
        pod_body("model", container(gpu="1"), model="gpt-17", latency_target_ms="20"),
        "annotation arkgpu.io/model: the predictor knows no model 'gpt-17' (known: alexnet,",
    ),
    (
        pod_body("forged", container(cpu="1"), assignment='{"version":1}'),
        "annotation arkgpu.io/assignment is written by ArkGPU",
    ),
]


def test_bad_pods_are_refused_with_readable_reasons(
    api: k8s.ApiClient, webhook: Webhook, inventory_node: str, namespace: str
) -> None:
    """Each bad pod: 403 from the API server, quoting the webhook's reason; nothing stored.
    The assignment annotation, refused on CREATE, is accepted on UPDATE (the extender's bind)."""
    core = k8s.CoreV1Api(api)
    with registered(api, webhook, namespace):
        memory = pod_body("probe", container(gpu="1", gpumem=str(HUGE_MIB)))
        wait_for(lambda: refusal(api, namespace, memory), ACTIVE_TIMEOUT_S, "node inventory seen")
        for body, reason in BAD_PODS:
            with pytest.raises(ApiException) as caught:
                core.create_namespaced_pod(namespace, json_body(body))
            assert caught.value.status == 403
            message = json.loads(filled(caught.value.body))["message"]
            assert 'admission webhook "validate.arkgpu.io" denied the request: ' in message
            assert reason in message, message
        assert core.list_namespaced_pod(namespace).items == []
        core.create_namespaced_pod(namespace, json_body(pod_body("placed", container(gpu="1"))))
        assignment = {contract.ANNOTATION_ASSIGNMENT: '{"version":1}'}
        patched = core.patch_namespaced_pod(
            "placed", namespace, {"metadata": {"annotations": assignment}}
        )
        annotations = filled(filled(patched.metadata).annotations)
        assert annotations[contract.ANNOTATION_ASSIGNMENT] == '{"version":1}'
