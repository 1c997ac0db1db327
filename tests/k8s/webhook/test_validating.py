"""The validating webhook refuses bad GPU pods with a message naming the container and the field."""

from __future__ import annotations

from typing import Any

import pytest

from arkgpu.k8s import contract

from .builders import LARGEST_MIB, admission, container, pod, review

LC = {
    contract.ANNOTATION_QOS: "lc",
    contract.ANNOTATION_MODEL: "resnet50",
    contract.ANNOTATION_LATENCY_TARGET_MS: "25",
    contract.ANNOTATION_MAX_BATCH: "8",
    contract.ANNOTATION_PEAK_RPS: "400.5",
}


def _verdict(obj: dict[str, Any], operation: str = "CREATE", **kw: Any) -> dict[str, Any]:
    old = kw.pop("old", None)
    answer = admission(**kw).validate(review(obj, operation, old=old))
    response: dict[str, Any] = answer["response"]
    assert "patch" not in response
    return response


def _refused(obj: dict[str, Any], *parts: str, **kw: Any) -> str:
    response = _verdict(obj, **kw)
    assert response["allowed"] is False
    status = response["status"]
    assert (status["code"], status["status"], status["reason"]) == (403, "Failure", "Forbidden")
    for part in parts:
        assert part in status["message"], status["message"]
    message: str = status["message"]
    return message


def test_good_pods_are_allowed() -> None:
    """HAMi pods, an LC pod with every annotation, a CPU pod: allowed."""
    for obj in (
        pod(container(gpu="1")),
        pod(container(gpu="2", gpumem="8192", gpucores="30")),
        pod(container(gpu="1", gpumem_percentage="100", gpucores="100"), annotations=LC),
        pod(container(cpu="4")),
    ):
        response = _verdict(obj)
        assert response["allowed"] is True, response
        assert response["status"]["code"] == 200


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (
            {"gpucores": "150"},
            "container 'main': nvidia.com/gpucores is 150, but it is a percentage",
        ),
        ({"gpucores": "0"}, "nvidia.com/gpucores is 0"),
        (
            {"gpucores": "500m"},
            "container 'main': nvidia.com/gpucores must be a whole number, got '500m'",
        ),
        (
            {"gpumem_percentage": "101"},
            "nvidia.com/gpumem-percentage is 101, but it is a percentage of one GPU's memory",
        ),
        ({"gpumem": "0"}, "nvidia.com/gpumem is 0"),
        (
            {"gpumem": "81921"},
            "nvidia.com/gpumem is 81921 MiB per GPU, more than the largest GPU in this cluster "
            "has (81920 MiB)",
        ),
        ({"gpumem": "4Gi"}, "nvidia.com/gpumem must be a whole number, got '4Gi'"),
    ],
)
def test_resource_out_of_range_is_named(limits: dict[str, str], expected: str) -> None:
    """Each resource rule names the container, the resource, the value and the bound."""
    _refused(pod(container(gpu="1", **limits)), expected)


def test_gpu_count_over_configured_maximum() -> None:
    """nvidia.com/gpu over max_gpu_count (8 in these rules) is refused; 8 is fine."""
    _refused(pod(container(gpu="9")), "nvidia.com/gpu is 9, over the 8 GPUs one container may ask")
    assert _verdict(pod(container(gpu="8")))["allowed"] is True


def test_memory_without_gpu_count() -> None:
    """gpumem without nvidia.com/gpu: refused, telling what to add."""
    _refused(pod(container(gpumem="1024")), "nvidia.com/gpumem is given without nvidia.com/gpu")


def test_memory_bound_unknown_is_not_checked() -> None:
    """No node inventory yet: a large gpumem passes (the extender keeps it pending)."""
    assert _verdict(pod(container(gpu="1", gpumem="999999")), largest=None)["allowed"] is True
    assert _verdict(pod(container(gpu="1", gpumem=str(LARGEST_MIB))))["allowed"] is True


def test_init_container_is_named_as_such() -> None:
    """A bad init container is named ``init container '<name>'``."""
    _refused(
        pod(container(cpu="1"), init=(container("warm", gpu="1", gpucores="101"),)),
        "init container 'warm': nvidia.com/gpucores is 101",
    )


def test_two_gpu_containers_are_refused_with_the_reason() -> None:
    """Two app containers asking for nvidia.com/gpu: refused at admission, both named (they
    would otherwise stay Pending: the extender places one GPU container per pod)."""
    _refused(
        pod(container("a", gpu="1"), container("b", gpu="2"), container("c", cpu="1")),
        "containers 'a', 'b' ask for nvidia.com/gpu: ArkGPU gives GPUs to one container",
    )
    assert _verdict(pod(container("a", gpu="1"), container("b", gpu="0")))["allowed"] is True


def test_a_gpu_init_container_needs_an_app_container_asking_for_as_many() -> None:
    """The kubelet hands an init container's devices to the app container: an init container
    asking for more than the pod's GPU container (or with none) is refused; fewer or equal is
    allowed."""
    _refused(
        pod(container("main", gpu="1"), init=(container("warm", gpu="2"),)),
        "init container 'warm' asks for 2 nvidia.com/gpu but the pod's GPU container asks for 1",
    )
    _refused(
        pod(container("main", cpu="1"), init=(container("warm", gpu="1"),)),
        "asks for 1 nvidia.com/gpu but the pod's GPU container asks for 0",
    )
    for count in ("1", "2"):
        good = pod(container("main", gpu="2"), init=(container("warm", gpu=count),))
        assert _verdict(good)["allowed"] is True


def test_every_problem_is_reported() -> None:
    """Two bad containers and a bad annotation: one message with all three, first reason counted."""
    message = _refused(
        pod(
            container("a", gpu="1", gpucores="120"),
            container("b", gpu="1", gpumem="999999"),
            annotations={contract.ANNOTATION_QOS: "gold"},
        ),
        "container 'a'",
        "container 'b'",
        "unknown QoS class 'gold'",
    )
    assert message.count("; ") == 3  # and the two GPU containers


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            contract.ANNOTATION_QOS,
            "gold",
            "annotation arkgpu.io/qos: unknown QoS class 'gold': use lc",
        ),
        (
            contract.ANNOTATION_LATENCY_TARGET_MS,
            "fast",
            "annotation arkgpu.io/latency-target-ms: expected a number above 0 (milliseconds), "
            "got 'fast'",
        ),
        (
            contract.ANNOTATION_LATENCY_TARGET_MS,
            "-5",
            "latency-target-ms: expected a number above 0",
        ),
        (
            contract.ANNOTATION_LATENCY_TARGET_MS,
            "nan",
            "latency-target-ms: expected a number above 0",
        ),
        (
            contract.ANNOTATION_MAX_BATCH,
            "2.5",
            "annotation arkgpu.io/max-batch: expected a whole number above 0",
        ),
        (contract.ANNOTATION_MAX_BATCH, "0", "max-batch: expected a whole number above 0"),
        (
            contract.ANNOTATION_PEAK_RPS,
            "inf",
            "annotation arkgpu.io/peak-rps: expected a number above 0",
        ),
        (
            contract.ANNOTATION_MODEL,
            "gpt-17",
            "annotation arkgpu.io/model: the predictor knows no model 'gpt-17' "
            "(known: bert, resnet50, vgg16)",
        ),
    ],
)
def test_malformed_annotation_is_named(key: str, value: str, expected: str) -> None:
    """Each annotation rule names the annotation, the value and what is expected."""
    _refused(pod(container(gpu="1"), annotations={**LC, key: value}), expected)


def test_latency_target_needs_a_model() -> None:
    """A latency target without arkgpu.io/model is refused: the predictor needs the model."""
    notes = {contract.ANNOTATION_QOS: "lc", contract.ANNOTATION_LATENCY_TARGET_MS: "20"}
    _refused(
        pod(container(gpu="1"), annotations=notes),
        "annotation arkgpu.io/latency-target-ms needs arkgpu.io/model",
    )


@pytest.mark.parametrize("key", [contract.ANNOTATION_ASSIGNMENT, contract.ANNOTATION_ALLOCATED])
def test_reserved_annotations_refused_on_create_only(key: str) -> None:
    """A new pod (GPU or not) may not carry the assignment or allocated annotation; an UPDATE
    that adds it (the extender's bind, the device plugin's Allocate) passes."""
    for obj in (
        pod(container(gpu="1"), annotations={key: "{}"}),
        pod(container(cpu="1"), annotations={key: "x"}),
    ):
        _refused(obj, f"annotation {key} is written by ArkGPU")
        old = pod(container(gpu="1"))
        assert _verdict(obj, "UPDATE", old=old)["allowed"] is True


def test_update_checks_only_changed_workload_annotations() -> None:
    """UPDATE: an unchanged bad annotation (a model dropped from the predictor) is not held
    against the pod; changing an annotation to a bad value is refused; resources (immutable)
    are not re-checked."""
    stale = pod(container(gpu="1"), annotations={**LC, contract.ANNOTATION_MODEL: "retired"})
    assert _verdict(stale, "UPDATE", old=stale)["allowed"] is True
    good = pod(container(gpu="1"), annotations=LC)
    changed = pod(container(gpu="1"), annotations={**LC, contract.ANNOTATION_QOS: "gold"})
    _refused(changed, "unknown QoS class 'gold'", operation="UPDATE", old=good)
    bigger = pod(container(gpu="1", gpucores="500"))
    assert _verdict(bigger, "UPDATE", old=bigger)["allowed"] is True


def test_cpu_pod_with_arkgpu_annotations_gets_a_warning() -> None:
    """No GPU: ArkGPU annotations are not judged but a warning says they do nothing."""
    response = _verdict(pod(container(cpu="1"), annotations={contract.ANNOTATION_QOS: "gold"}))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "arkgpu.io/qos: no effect on a pod that asks for no nvidia.com/gpu"
    ]


def test_delete_and_subresources_are_not_judged() -> None:
    """DELETE, CONNECT and a pods/binding CREATE are allowed without looking at the object."""
    handlers = admission()
    bad = pod(container(gpu="1", gpucores="900"))
    for operation in ("DELETE", "CONNECT"):
        assert handlers.validate(review(None, operation, old=bad))["response"]["allowed"] is True
    binding = review({"kind": "Binding"})
    binding["request"]["kind"] = {"group": "", "version": "v1", "kind": "Binding"}
    binding["request"]["subResource"] = "binding"
    answer = handlers.validate(binding)["response"]
    assert answer["allowed"] is True
    assert answer["status"]["message"] == "Binding/binding: not judged (pods only)"
