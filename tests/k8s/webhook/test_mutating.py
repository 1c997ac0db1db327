"""The mutating webhook: GPU pods to ArkGPU's scheduler, defaults filled, nothing else changed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.k8s import contract
from arkgpu.k8s.webhook.config import AdmissionDefaults
from arkgpu.k8s.webhook.mutating import pointer

from .builders import admission, apply_patch, container, decoded_patch, pod, review


def _mutated(obj: dict[str, Any], defaults: AdmissionDefaults | None = None) -> dict[str, Any]:
    answer = admission(defaults).mutate(review(obj))
    assert answer["response"]["allowed"] is True
    return apply_patch(obj, decoded_patch(answer))


def test_hami_pod_goes_to_arkgpu_scheduler_without_a_class() -> None:
    """A pod with HAMi's resources: schedulerName arkgpu-scheduler; no class written (it keeps
    HAMi's meaning of gpucores); resources untouched. A configured qos default is written."""
    before = pod(container(gpu="1", gpumem="4096", gpucores="30"))
    after = _mutated(before)
    assert after["spec"]["schedulerName"] == contract.SCHEDULER_NAME
    assert "annotations" not in after["metadata"]
    assert after["spec"]["containers"] == before["spec"]["containers"]
    opted = _mutated(before, AdmissionDefaults(qos="be"))
    assert opted["metadata"]["annotations"] == {contract.ANNOTATION_QOS: "be"}


def test_message_says_what_was_set() -> None:
    """status.message lists every change, for a person reading the audit log."""
    answer = admission(AdmissionDefaults(qos="be")).mutate(review(pod(container(gpu="1"))))
    message = answer["response"]["status"]["message"]
    assert "schedulerName arkgpu-scheduler" in message
    assert "arkgpu.io/qos=be" in message


def test_pod_without_gpu_is_unchanged() -> None:
    """No nvidia.com/gpu (or gpu 0): allowed, no patch at all."""
    for obj in (pod(container(cpu="1")), pod(container(gpu="0"))):
        answer = admission(AdmissionDefaults(gpucores=50)).mutate(review(obj))
        assert answer["response"]["allowed"] is True
        assert "patch" not in answer["response"]
        assert "patchType" not in answer["response"]


def test_other_scheduler_is_kept() -> None:
    """A pod that names a non-default scheduler keeps it; the qos default still applies."""
    after = _mutated(pod(container(gpu="1"), scheduler="volcano"), AdmissionDefaults(qos="be"))
    assert after["spec"]["schedulerName"] == "volcano"
    assert after["metadata"]["annotations"][contract.ANNOTATION_QOS] == "be"


def test_existing_qos_and_annotations_are_kept() -> None:
    """An LC pod keeps its class; other annotations stay; the key is added to the existing map."""
    notes = {contract.ANNOTATION_QOS: "lc", "team": "vision"}
    be = AdmissionDefaults(qos="be")
    after = _mutated(pod(container(gpu="1"), annotations=notes), be)
    assert after["metadata"]["annotations"] == notes
    added = _mutated(pod(container(gpu="1"), annotations={"team": "vision"}), be)
    assert added["metadata"]["annotations"] == {"team": "vision", contract.ANNOTATION_QOS: "be"}


def test_init_container_asking_for_gpu_counts() -> None:
    """A GPU only in an init container still sends the pod to ArkGPU, defaults on that one."""
    defaults = AdmissionDefaults(gpucores=25)
    after = _mutated(pod(container(cpu="1"), init=(container("warm", gpu="1"),)), defaults)
    assert after["spec"]["schedulerName"] == contract.SCHEDULER_NAME
    init = after["spec"]["initContainers"][0]["resources"]
    assert init["limits"]["nvidia.com/gpucores"] == "25"
    assert init["requests"]["nvidia.com/gpucores"] == "25"
    assert after["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}


def test_configured_defaults_fill_only_what_is_missing() -> None:
    """gpucores and gpumem defaults go where absent; a given gpumem-percentage blocks gpumem."""
    defaults = AdmissionDefaults(gpucores=50, gpumem=2048)
    after = _mutated(
        pod(
            container("a", gpu="1"),
            container("b", gpu="1", gpucores="10", gpumem_percentage="20"),
            container("c", cpu="2"),
        ),
        defaults,
    )
    limits = [c["resources"].get("limits") for c in after["spec"]["containers"]]
    assert limits[0] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": "50",
        "nvidia.com/gpumem": "2048",
    }
    assert limits[1] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": "10",
        "nvidia.com/gpumem-percentage": "20",
    }
    assert limits[2] == {"cpu": "2"}


def test_percentage_default_and_no_requests_map() -> None:
    """gpumem_percentage fills memory; a container without ``requests`` gets limits only."""
    obj = pod(container(gpu="2"))
    del obj["spec"]["containers"][0]["resources"]["requests"]
    after = _mutated(obj, AdmissionDefaults(gpumem_percentage=50))
    resources = after["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50"}}


def test_whole_gpu_default_adds_no_resource() -> None:
    """Without configured gpucores/gpumem defaults a GPU container's resources stay as given."""
    ops = decoded_patch(admission().mutate(review(pod(container(gpu="1")))))
    assert {op["path"] for op in ops} == {"/spec/schedulerName"}


def test_malformed_request_is_left_to_validation() -> None:
    """A gpucores of 500m: allowed unchanged here (the validating webhook refuses it)."""
    answer = admission(AdmissionDefaults(gpucores=50)).mutate(
        review(pod(container(gpu="1", gpucores="500m")))
    )
    assert answer["response"]["allowed"] is True
    assert "patch" not in answer["response"]
    assert "nvidia.com/gpucores" in answer["response"]["status"]["message"]


def test_only_create_is_mutated() -> None:
    """UPDATE, DELETE: allowed, unchanged (schedulerName is immutable once created)."""
    obj = pod(container(gpu="1"))
    for operation in ("UPDATE", "DELETE", "CONNECT"):
        answer = admission().mutate(review(obj, operation, old=obj))
        assert answer["response"]["allowed"] is True
        assert "patch" not in answer["response"]


def test_json_pointer_escapes_slash_and_tilde() -> None:
    """RFC 6901: ``/`` as ``~1``, ``~`` as ``~0``."""
    assert (
        pointer("metadata", "annotations", "arkgpu.io/qos")
        == "/metadata/annotations/arkgpu.io~1qos"
    )
    assert pointer("a~b", 0) == "/a~0b/0"


QUANTITIES = st.sampled_from(["0", "1", "2", "50", "100", "150", "4096", "500m", "1Gi", "x"])
LIMITS = st.dictionaries(
    st.sampled_from(["gpu", "gpumem", "gpucores", "gpumem_percentage", "cpu"]),
    QUANTITIES,
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(LIMITS, min_size=1, max_size=3),
    st.lists(LIMITS, max_size=2),
    st.sampled_from(["default-scheduler", "volcano", contract.SCHEDULER_NAME]),
    st.one_of(st.none(), st.just({}), st.just({contract.ANNOTATION_QOS: "lc"})),
    st.sampled_from([AdmissionDefaults(), AdmissionDefaults(gpucores=40, gpumem=1024)]),
)
def test_mutation_is_idempotent_and_touches_only_its_fields(
    main: list[dict[str, str]],
    init: list[dict[str, str]],
    scheduler: str,
    annotations: dict[str, str] | None,
    defaults: AdmissionDefaults,
) -> None:
    """Any pod: a second call on the patched pod patches nothing; only schedulerName, the qos
    annotation and the GPU containers' gpucores/gpumem limits and requests ever change."""
    obj = pod(
        *(container(f"c{n}", **lim) for n, lim in enumerate(main)),
        init=tuple(container(f"i{n}", **lim) for n, lim in enumerate(init)),
        annotations=annotations,
        scheduler=scheduler,
    )
    handlers = admission(defaults)
    once = apply_patch(obj, decoded_patch(handlers.mutate(review(obj))))
    assert decoded_patch(handlers.mutate(review(once))) == []
    for op in decoded_patch(handlers.mutate(review(obj))):
        path = op["path"]
        assert path in (
            "/spec/schedulerName",
            "/metadata/annotations",
            "/metadata/annotations/arkgpu.io~1qos",
        ) or path.endswith(
            ("nvidia.com~1gpucores", "nvidia.com~1gpumem", "nvidia.com~1gpumem-percentage")
        ), path
    if scheduler != "default-scheduler":
        assert once["spec"]["schedulerName"] == scheduler


@pytest.mark.parametrize("scheduler", ["", None])
def test_missing_scheduler_name_is_set(scheduler: str | None) -> None:
    """A pod without schedulerName (a hand-made review) is sent to ArkGPU too."""
    obj = pod(container(gpu="1"))
    if scheduler is None:
        del obj["spec"]["schedulerName"]
    else:
        obj["spec"]["schedulerName"] = scheduler
    assert _mutated(obj)["spec"]["schedulerName"] == contract.SCHEDULER_NAME
