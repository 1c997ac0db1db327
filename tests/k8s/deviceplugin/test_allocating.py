"""Regions keyed by devices, the pod holding them, its limits; virtual devices (pure code)."""

from __future__ import annotations

from typing import Any

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin import allocating, apiserver, devices
from arkgpu.k8s.deviceplugin.allocating import AllocationError
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.podresources import Holder

NODE = "n1"


def _pod(
    name: str,
    created: str,
    gpus: tuple[AssignedGpu, ...] | None,
    node: str = NODE,
    **kwargs: Any,  # PodInfo's other fields
) -> PodInfo:
    notes = {}
    if gpus is not None:
        notes[contract.ANNOTATION_ASSIGNMENT] = PodAssignment(node, gpus).to_json()
    limits = {contract.RESOURCE_GPU: str(len(gpus or ()))}
    return PodInfo("ns", name, f"u-{name}", node, created, notes, (("c", limits),), **kwargs)


def _gpu(index: int, share: int = 5000, memory: int = 1024) -> AssignedGpu:
    return AssignedGpu(index, f"GPU-{index}", memory, share)


def test_waiting_pods_skip_terminal_deleting_holding_and_unassigned_ones_oldest_first() -> None:
    """A pod rejected by the kubelet (Failed), finished, deleting, holding devices already
    (per PodResources), another node's or unassigned never steers a preference."""
    pods = [
        _pod("young", "2026-12-04T10:00:00Z", (_gpu(0),)),
        _pod("old", "2026-12-04T09:00:00Z", (_gpu(1),)),
        _pod("elsewhere", "1", (_gpu(0),), node="n2"),
        _pod("rejected", "1", (_gpu(0),), phase="Failed"),
        _pod("finished", "1", (_gpu(0),), phase="Succeeded"),
        _pod("holding", "1", (_gpu(0),), phase="Running"),
        _pod("going", "1", (_gpu(0),), deleting=True),
        _pod("plain", "1", None),
    ]
    waiting = allocating.waiting_pods(pods, NODE, {("ns", "holding")})
    assert [p.name for p in waiting] == ["old", "young"]
    assert allocating.preferred_uuids(waiting, NODE, 1) == ("GPU-1",)
    assert allocating.preferred_uuids(waiting, NODE, 2) == ()
    pair = _pod("pair", "0", (_gpu(2), _gpu(3)))
    assert allocating.preferred_uuids([pair, *waiting], NODE, 1) == ("GPU-1",)  # exact first
    assert allocating.preferred_uuids([pair], NODE, 1) == ("GPU-2", "GPU-3")  # its init container


def test_waiting_pods_created_in_one_second_come_in_the_order_they_reached_the_node() -> None:
    """Replicas created in the same second: the kubelet admits them in the order its watch
    delivers them (resource version), not in name order; the preference follows it."""
    second = "2026-12-04T10:00:00Z"
    pods = [
        _pod("rep-a", second, (_gpu(1),), revision=112),
        _pod("rep-b", second, (_gpu(0),), revision=111),
    ]
    waiting = allocating.waiting_pods(pods, NODE, set())
    assert [p.name for p in waiting] == ["rep-b", "rep-a"]
    assert allocating.preferred_uuids(waiting, NODE, 1) == ("GPU-0",)


def test_the_region_is_named_after_the_devices_in_any_order() -> None:
    """Same devices, same region (a repeated Allocate, an init container's reused devices)."""
    one = allocating.region_key(["GPU-1::3", "GPU-0::1"])
    assert one == allocating.region_key(["GPU-0::1", "GPU-1::3"])
    assert one != allocating.region_key(["GPU-0::1", "GPU-1::4"])
    assert one.startswith(allocating.REGION_PREFIX)
    assert "/" not in one
    assert allocating.gpus_of(["GPU-1::3", "GPU-0::1", "GPU-1::0"]) == ("GPU-0", "GPU-1")


def test_holding_pods_are_those_whose_container_holds_the_devices() -> None:
    """Exact or overlapping sets (an app container reusing part of an init container's
    devices) name the pod; others' devices do not."""
    holders = [
        Holder("ns", "a", "c", frozenset({"GPU-0::0"})),
        Holder("ns", "b", "c", frozenset({"GPU-0::1", "GPU-1::1"})),
    ]
    assert allocating.holding_pods(holders, ["GPU-0::0"]) == [("ns", "a")]
    assert allocating.holding_pods(holders, ["GPU-1::1"]) == [("ns", "b")]
    assert allocating.holding_pods(holders, ["GPU-0::9"]) == []


def test_limits_follow_the_allocated_gpus_order_with_the_pods_own_values() -> None:
    """Each allocated GPU takes its assigned GPU's cap (0: none); one share, the smallest; a
    GPU the kubelet chose instead of the assigned one takes the unmatched assigned GPU's."""
    assignment = PodAssignment(NODE, (_gpu(1, 4000, 0), _gpu(0, 2500, 512)))
    limits = allocating.limits_for(assignment, ("GPU-0", "GPU-1"))
    assert limits.memory_bytes == (512 << 20, None)
    assert limits.share_bp == 2500
    other = allocating.limits_for(assignment, ("GPU-0", "GPU-7"))
    assert other.memory_bytes == (512 << 20, None)


def test_assignment_of_refuses_missing_foreign_or_malformed_ones() -> None:
    """Readable reasons naming the pod (the kubelet shows them on the pod)."""
    with pytest.raises(
        AllocationError, match=r"pod ns/p holds nvidia\.com/gpu devices but carries"
    ):
        allocating.assignment_of(_pod("p", "1", None), NODE)
    with pytest.raises(AllocationError, match="assignment is for node 'n2', not n1"):
        allocating.assignment_of(_pod("p", "1", (_gpu(0),), node="n2"), NODE)
    bad = PodInfo("ns", "p", "u", NODE, "1", {contract.ANNOTATION_ASSIGNMENT: "{"})
    with pytest.raises(AllocationError, match="pod ns/p: "):
        allocating.assignment_of(bad, NODE)


def test_lc_pod_needs_a_latency_target_and_positive_numbers() -> None:
    """The message names the pod and the annotation (the kubelet shows it on the pod)."""
    assignment = PodAssignment(NODE, (_gpu(0),), qos="lc")
    pod = PodInfo("ns", "svc", "u", NODE, "1", {})
    with pytest.raises(
        AllocationError,
        match=f"pod ns/svc: qos lc needs annotation {contract.ANNOTATION_LATENCY_TARGET_MS}",
    ):
        allocating.pod_description(pod, assignment, [0], 0, "c")
    pod = PodInfo("ns", "svc", "u", NODE, "1", {contract.ANNOTATION_LATENCY_TARGET_MS: "-3"})
    with pytest.raises(AllocationError, match="expected a positive number, got '-3'"):
        allocating.pod_description(pod, assignment, [0], 0, "c")


def test_check_devices_refuses_devices_not_advertised_or_unhealthy() -> None:
    """A device of a GPU this node does not have (or in MIG mode), or of an unhealthy one."""
    with pytest.raises(AllocationError, match="GPU-0::1 is not advertised here"):
        allocating.check_devices(["GPU-0::1"], [InventoryGpu(0, "GPU-9", "m", 1)])
    with pytest.raises(AllocationError, match="not advertised"):
        allocating.check_devices(["GPU-0::1"], [InventoryGpu(0, "GPU-0", "m", 1, mig=True)])
    with pytest.raises(AllocationError, match="GPU-0::1: GPU is unhealthy"):
        allocating.check_devices(["GPU-0::1"], [InventoryGpu(0, "GPU-0", "m", 1, healthy=False)])
    allocating.check_devices(["GPU-0::1"], [InventoryGpu(0, "GPU-0", "m", 1)])


def test_virtual_devices_per_gpu_with_health_and_no_mig() -> None:
    """split_count devices per non-MIG GPU, Unhealthy when the GPU is."""
    gpus = [
        InventoryGpu(0, "GPU-a", "m", 1),
        InventoryGpu(1, "GPU-b", "m", 1, healthy=False),
        InventoryGpu(2, "GPU-c", "m", 1, mig=True),
    ]
    listed = devices.virtual_devices(gpus, 3)
    assert [(d.id, d.health) for d in listed] == [
        ("GPU-a::0", "Healthy"),
        ("GPU-a::1", "Healthy"),
        ("GPU-a::2", "Healthy"),
        ("GPU-b::0", "Unhealthy"),
        ("GPU-b::1", "Unhealthy"),
        ("GPU-b::2", "Unhealthy"),
    ]
    assert devices.gpu_of("GPU-a::2") == "GPU-a"


def test_preferred_takes_must_include_then_one_device_per_assigned_gpu() -> None:
    """must_include first, then one device of each assigned GPU, then the rest in order."""
    available = ["GPU-a::0", "GPU-a::1", "GPU-b::0", "GPU-b::1", "GPU-c::0"]
    assert devices.preferred(available, [], 2, ["GPU-b", "GPU-c"]) == ["GPU-b::0", "GPU-c::0"]
    assert devices.preferred(available, ["GPU-a::1"], 2, ["GPU-b"]) == ["GPU-a::1", "GPU-b::0"]
    assert devices.preferred(available, [], 3, []) == available[:3]
    assert devices.preferred(available, [], 1, ["GPU-z"]) == ["GPU-a::0"]


def test_check_selection_refuses_gpus_the_pods_selection_excludes() -> None:
    """nvidia.com/use-gpuuuid, nouse-gpuuuid and the type filters hold for the GPUs the
    kubelet allocated too (checked at PreStartContainer, where the pod is known)."""
    here = [InventoryGpu(0, "GPU-0", "NVIDIA A10", 1), InventoryGpu(1, "GPU-1", "NVIDIA A10", 1)]
    for notes, reason in (
        ({"nvidia.com/use-gpuuuid": "GPU-1"}, "GPU GPU-0 is not named in annotation"),
        ({"nvidia.com/nouse-gpuuuid": "GPU-2, GPU-0"}, "GPU GPU-0 is excluded by annotation"),
        ({contract.ANNOTATION_USE_GPUTYPE: "H100"}, "GPU model NVIDIA A10 is not in annotation"),
        ({contract.ANNOTATION_NOUSE_GPUTYPE: "a10"}, "GPU model NVIDIA A10 is excluded"),
    ):
        pod = PodInfo("ns", "p", "u", NODE, "1", notes)
        with pytest.raises(AllocationError, match=f"pod ns/p: {reason}"):
            allocating.check_selection(pod, here, ["GPU-0"])
    pod = PodInfo("ns", "p", "u", NODE, "1", {"nvidia.com/use-gpuuuid": "GPU-1,GPU-0"})
    allocating.check_selection(pod, here, ["GPU-0", "GPU-1"])
    pod = PodInfo("ns", "p", "u", NODE, "1", {"nvidia.com/use-gpuuuid": "GPU-1"})
    with pytest.raises(AllocationError, match="pod ns/p: GPU GPU-0 is not named"):
        allocating.check_selection(pod, here, ["GPU-1", "GPU-0"])


def test_memory_without_cores_is_not_capped_in_compute() -> None:
    """A container that gave gpumem and no gpucores runs uncapped (HAMi); with gpucores, or
    a whole GPU, it keeps its share; a pod without a class is not elastic."""
    assignment = PodAssignment(NODE, (_gpu(0, 2700, 3000),))
    for limits, capped in (
        ({contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM: "3000"}, False),
        ({contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM_PERCENTAGE: "27"}, False),
        ({contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUCORES: "27"}, True),
        ({contract.RESOURCE_GPU: "1"}, True),
    ):
        pod = PodInfo("ns", "p", "u", NODE, "1", {}, (("c", limits),))
        _, asked = allocating.container_of(pod, "c", init=False)
        limits_now = allocating.limits_for(assignment, ["GPU-0"], allocating.cores_asked(asked))
        assert limits_now.share_bp == (2700 if capped else 10_000), limits
        assert limits_now.memory_bytes == (3000 << 20,)
        assert allocating.pod_description(pod, assignment, [0], 3000, "c")["elastic"] is False
    classed = PodInfo("ns", "p", "u", NODE, "1", {contract.ANNOTATION_QOS: "be"})
    assert allocating.pod_description(classed, assignment, [0], 3000, "c")["elastic"] is True


def test_an_init_containers_devices_take_its_own_limits_and_name() -> None:
    """Devices that are only part of the app container's are a GPU init container's: its
    name and its own resources decide (memory only: no compute cap)."""
    app = {contract.RESOURCE_GPU: "2", contract.RESOURCE_GPUCORES: "30"}
    setup = {contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM: "1000"}
    pod = PodInfo(
        "ns", "p", "u", NODE, "1", {}, (("main", app),),
        init_containers=(("plain", {}), ("setup", setup)),
    )  # fmt: skip
    assert allocating.container_of(pod, "main", init=False) == ("main", app)
    name, asked = allocating.container_of(pod, "main", init=True)
    assert (name, allocating.cores_asked(asked)) == ("setup", False)
    assert allocating.cores_asked(app)
    # a sidecar (restartable init container) holding its own devices is listed as itself
    assert allocating.container_of(pod, "setup", init=False) == ("setup", setup)


def test_pod_json_names_the_container_and_every_allocated_gpu() -> None:
    """gpu is the first allocated GPU's node index, gpus all of them; the names are the
    pod's and the container's."""
    assignment = PodAssignment(NODE, (_gpu(0), _gpu(1)))
    pod = PodInfo("team", "train", "u-1", NODE, "1", {})
    body = allocating.pod_description(pod, assignment, [3, 1], 1024, "main")
    assert (body["gpu"], body["gpus"], body["memory_mib"]) == (3, [3, 1], 1024)
    assert (body["namespace"], body["pod"], body["container"]) == ("team", "train", "main")
    assert body[allocating.OWNER_KEY] == "u-1"


@pytest.mark.parametrize(("version", "revision"), [("4711", 4711), ("opaque-7", 0), (None, 0)])
def test_a_pods_revision_is_its_numeric_resource_version(
    version: str | None, revision: int
) -> None:
    """The API server's resourceVersion orders pods created in one second; one that is not
    a number (another store) orders nothing."""
    from kubernetes import client as k8s  # noqa: PLC0415

    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", namespace="ns", uid="u", resource_version=version),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c")], node_name=NODE),
    )
    assert apiserver._pod_info(pod).revision == revision
