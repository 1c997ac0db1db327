"""Which pod an Allocate is for, its limits and devices (pure code)."""

from __future__ import annotations

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin import allocating, devices
from arkgpu.k8s.deviceplugin.allocating import AllocationError, Pending
from arkgpu.k8s.deviceplugin.apiserver import PodInfo

NODE = "n1"


def _pod(
    name: str,
    created: str,
    gpus: tuple[AssignedGpu, ...] | None,
    node: str = NODE,
    allocated: bool = False,
    **kwargs: object,
) -> PodInfo:
    notes = {}
    if gpus is not None:
        notes[contract.ANNOTATION_ASSIGNMENT] = PodAssignment(node, gpus).to_json()
    if allocated:
        notes[contract.ANNOTATION_ALLOCATED] = "2026-12-04T00:00:00Z"
    limits = {contract.RESOURCE_GPU: str(len(gpus or ()))}
    return PodInfo("ns", name, f"u-{name}", node, created, notes, (("c", limits),), **kwargs)


def _gpu(index: int, share: int = 5000, memory: int = 1024) -> AssignedGpu:
    return AssignedGpu(index, f"GPU-{index}", memory, share)


def test_pending_pods_are_assigned_here_unallocated_alive_and_oldest_first() -> None:
    """Skipped: another node's, allocated, deleting, unassigned, malformed; the rest by age."""
    bad = PodInfo("ns", "bad", "u", NODE, "1", {contract.ANNOTATION_ASSIGNMENT: "{"})
    pods = [
        _pod("young", "2026-12-04T10:00:00Z", (_gpu(0),)),
        _pod("old", "2026-12-04T09:00:00Z", (_gpu(1),)),
        _pod("elsewhere", "1", (_gpu(0),), node="n2"),
        _pod("done", "1", (_gpu(0),), allocated=True),
        _pod("going", "1", (_gpu(0),), deleting=True),
        _pod("plain", "1", None),
        bad,
    ]
    assert [p.pod.name for p in allocating.pending_pods(pods, NODE)] == ["old", "young"]


def test_choose_matches_size_then_the_devices_gpus() -> None:
    """Size first; among pods of that size, one whose GPUs are the devices' wins over age."""
    pending = allocating.pending_pods(
        [
            _pod("a", "1", (_gpu(0),)),
            _pod("b", "2", (_gpu(1),)),
            _pod("pair", "3", (_gpu(0), _gpu(1))),
        ],
        NODE,
    )
    one = allocating.choose(pending, ["GPU-1::3"])
    assert one is not None
    assert one.pod.name == "b"
    other = allocating.choose(pending, ["GPU-7::0"])
    assert other is not None
    assert other.pod.name == "a"
    two = allocating.choose(pending, ["GPU-0::1", "GPU-1::1"])
    assert two is not None
    assert two.pod.name == "pair"
    assert allocating.choose(pending, ["a", "b", "c"]) is None


def test_limits_take_each_gpus_memory_cap_and_the_smallest_share() -> None:
    """0 MiB means no cap; one share for the container: the smaller of its GPUs'."""
    assignment = PodAssignment(NODE, (_gpu(0, 4000, 0), _gpu(1, 2500, 512)))
    limits = allocating.limits_of(assignment)
    assert limits.memory_bytes == (None, 512 << 20)
    assert limits.share_bp == 2500


def test_lc_pod_needs_a_latency_target_and_positive_numbers() -> None:
    """The message names the pod and the annotation (the kubelet shows it on the pod)."""
    assignment = PodAssignment(NODE, (_gpu(0),), qos="lc")
    pod = PodInfo("ns", "svc", "u", NODE, "1", {})
    with pytest.raises(
        AllocationError,
        match=f"pod ns/svc: qos lc needs annotation {contract.ANNOTATION_LATENCY_TARGET_MS}",
    ):
        allocating.pod_description(Pending(pod, assignment, "c"))
    pod = PodInfo("ns", "svc", "u", NODE, "1", {contract.ANNOTATION_LATENCY_TARGET_MS: "-3"})
    with pytest.raises(AllocationError, match="expected a positive number, got '-3'"):
        allocating.pod_description(Pending(pod, assignment, "c"))


def test_check_gpus_refuses_gpus_not_here_or_unhealthy() -> None:
    """An assignment naming a GPU this node does not have, or an unhealthy one."""
    pending = Pending(_pod("p", "1", (_gpu(0),)), PodAssignment(NODE, (_gpu(0),)), "c")
    with pytest.raises(AllocationError, match="GPU-0 is not on node n1"):
        allocating.check_gpus(pending, [InventoryGpu(0, "GPU-9", "m", 1)], NODE)
    with pytest.raises(AllocationError, match="GPU-0 is unhealthy"):
        allocating.check_gpus(pending, [InventoryGpu(0, "GPU-0", "m", 1, healthy=False)], NODE)
    allocating.check_gpus(pending, [InventoryGpu(0, "GPU-0", "m", 1)], NODE)


def test_region_names_never_collide() -> None:
    """namespace_pod_container: '_' is in none of them."""
    pending = Pending(_pod("p.x", "1", (_gpu(0),)), PodAssignment(NODE, (_gpu(0),)), "main")
    assert allocating.region_name(pending) == "ns_p.x_main"


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


def test_check_gpus_refuses_gpus_the_pods_selection_excludes() -> None:
    """nvidia.com/use-gpuuuid, nouse-gpuuuid and the type filters hold in Allocate too."""
    here = [InventoryGpu(0, "GPU-0", "NVIDIA A10", 1), InventoryGpu(1, "GPU-1", "NVIDIA A10", 1)]
    assignment = PodAssignment(NODE, (_gpu(0),))
    for notes, reason in (
        ({"nvidia.com/use-gpuuuid": "GPU-1"}, "GPU GPU-0 is not named in annotation"),
        ({"nvidia.com/nouse-gpuuuid": "GPU-2, GPU-0"}, "GPU GPU-0 is excluded by annotation"),
        ({contract.ANNOTATION_USE_GPUTYPE: "H100"}, "GPU model NVIDIA A10 is not in annotation"),
        ({contract.ANNOTATION_NOUSE_GPUTYPE: "a10"}, "GPU model NVIDIA A10 is excluded"),
    ):
        pod = PodInfo("ns", "p", "u", NODE, "1", notes)
        with pytest.raises(AllocationError, match=f"pod ns/p: {reason}"):
            allocating.check_gpus(Pending(pod, assignment, "c"), here, NODE)
    pod = PodInfo("ns", "p", "u", NODE, "1", {"nvidia.com/use-gpuuuid": "GPU-1,GPU-0"})
    allocating.check_gpus(Pending(pod, assignment, "c"), here, NODE)


def test_memory_without_cores_is_not_capped_in_compute() -> None:
    """A container that gave gpumem and no gpucores runs uncapped (HAMi); with gpucores, or
    a whole GPU, it keeps its share; a pod without a class is not elastic."""
    assignment = PodAssignment(NODE, (_gpu(0, 2700, 3000),))
    for limits, capped in (
        ({contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM: "3000"}, False),
        ({contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM_PERCENTAGE: "27"}, False),
        ({contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUCORES: "27"}, True),
    ):
        pod = PodInfo("ns", "p", "u", NODE, "1", {}, (("c", limits),))
        pending = Pending(pod, assignment, "c")
        limits_now = allocating.limits_of(assignment, allocating.cores_asked(pending))
        assert limits_now.share_bp == (2700 if capped else 10_000), limits
        assert limits_now.memory_bytes == (3000 << 20,)
        assert allocating.pod_description(pending)["elastic"] is False
    classed = PodInfo("ns", "p", "u", NODE, "1", {contract.ANNOTATION_QOS: "be"})
    assert allocating.pod_description(Pending(classed, assignment, "c"))["elastic"] is True
