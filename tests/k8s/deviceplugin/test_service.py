"""The plugin in-process (real gRPC over Unix sockets, the kubelet emulator with its device
manager and PodResources API) with an in-memory API server: which pod a container's region is
for, Allocate without the API server, restarts, init containers, region collection."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin.allocating import region_key
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.plugin import DevicePlugin
from arkgpu.k8s.deviceplugin.podresources import PodResourcesClient
from arkgpu.k8s.deviceplugin.wire import pb
from arkgpu.k8s.gpus import AssumedGpus
from arkgpu.k8s.inventory import InventoryPublisher
from arkgpu.limiter.region import read_limits
from k8s.device_manager import PodSpec
from k8s.kubelet_emulator import KubeletEmulator

from .fake_apiserver import MemoryApi

NODE = "n1"
WAIT_S = 30.0
MIB = 1 << 20


class Gpus:
    """A GPU source the test changes."""

    def __init__(self) -> None:
        self.gpus = AssumedGpus(2, 4096).scan()

    def scan(self) -> tuple[InventoryGpu, ...]:
        return self.gpus


@dataclass
class Running:
    plugin: DevicePlugin
    kubelet: KubeletEmulator
    api: MemoryApi
    gpus: Gpus
    root: Path
    logs: list[str]

    def region(self, devices: list[str]) -> Path:
        return self.root / "r" / region_key(devices)


def _pod(name: str, created: str, index: int, share: int, phase: str = "Pending") -> PodInfo:
    gpu = AssignedGpu(index, f"GPU-assumed-{index}", 1024 * (index + 1), share)
    notes = {contract.ANNOTATION_ASSIGNMENT: PodAssignment(NODE, (gpu,)).to_json()}
    return PodInfo("ns", name, f"u-{name}", NODE, created, notes, (("c", {}),), phase=phase)


def _spec(name: str, init: int = 0) -> PodSpec:
    return PodSpec("ns", name, (("c", 1),), (("setup", init),) if init else ())


@pytest.fixture
def running() -> Iterator[Running]:
    """The plugin looping in a thread; the emulator started only by the test."""
    root = Path(tempfile.mkdtemp(prefix="dps-", dir="/tmp"))
    (root / "k").mkdir()
    (root / "dev").mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (root / "dev" / name).touch()
    config = DevicePluginConfig(
        node_name=NODE,
        kubelet_dir=root / "k",
        regions_dir=root / "r",
        library_path=Path("/lib/x.so"),
        preload_file=root / "preload",
        pod_resources_socket=root / "k" / "pod-resources.sock",
        dev_root=root / "dev",
        region_grace_s=0.0,
        split_count=2,
        inventory_period_s=0.1,
        kubelet_check_s=0.1,
    )
    api, gpus, logs = MemoryApi(), Gpus(), list[str]()
    holders = PodResourcesClient(config.pod_resources_socket)
    inventory = InventoryPublisher(api, NODE, lambda: "t")
    plugin = DevicePlugin(config, gpus, api, holders, inventory, logs.append)
    stop = threading.Event()
    thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
    thread.start()
    kubelet = KubeletEmulator(root / "k", config.pod_resources_socket)
    try:
        yield Running(plugin, kubelet, api, gpus, root, logs)
    finally:
        stop.set()
        thread.join(timeout=WAIT_S)
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not thread.is_alive()


def _started(r: Running) -> None:
    r.kubelet.start()
    r.kubelet.wait(lambda: r.kubelet.endpoints and r.kubelet.devices(), WAIT_S, "devices")


def _owner(region: Path) -> str:
    return str(json.loads((region / "pod.json").read_text())["pod_uid"])


def test_registers_with_a_kubelet_that_starts_after_the_plugin(running: Running) -> None:
    """No kubelet.sock at first: the plugin waits, then registers once it appears."""
    running.kubelet.wait(lambda: running.plugin.registrations == 0, 1.0, "not yet")
    _started(running)
    # the emulator may list devices before the plugin's Register call has returned
    running.kubelet.wait(lambda: running.plugin.registrations == 1, WAIT_S, "registered")
    assert len(running.kubelet.devices()) == 4
    assert running.kubelet.latest().request.options.pre_start_required


def test_a_rejected_older_pod_takes_nothing_from_a_younger_one(running: Running) -> None:
    """The older pod was rejected by the kubelet and its Failed phase has not reached the API
    yet: the preference may steer the younger pod to the older one's GPU, but the region gets
    the younger pod's own limits and names it; once the phase shows, the preference is right."""
    running.api.pods += [_pod("old", "1", 0, 7000), _pod("young", "2", 1, 2000)]
    _started(running)
    young = _spec("young")
    devices = running.kubelet.admit_pod(young)["c"]
    running.kubelet.start_container(young, "c")
    region = running.region(devices)
    assert read_limits(region).share_bp == 2000
    assert read_limits(region).memory_bytes == (2048 * MIB,)
    assert _owner(region) == "u-young"
    assert running.plugin.service.mismatches == 1

    running.api.pods[0] = replace(running.api.pods[0], phase="Failed")
    running.api.pods.append(_pod("next", "3", 1, 3000))
    nxt = _spec("next")
    assert running.kubelet.admit_pod(nxt)["c"][0].startswith("GPU-assumed-1::")
    running.kubelet.start_container(nxt, "c")
    assert read_limits(running.region(running.kubelet.manager.held[nxt.key, "c"])).share_bp == 3000
    assert running.plugin.service.mismatches == 1


def test_same_second_replicas_admitted_out_of_name_order_keep_their_own_limits(
    running: Running,
) -> None:
    """Two replicas created in the same second on one GPU: the kubelet admits rep-b first;
    each container's region holds its own pod's limits and UID."""
    running.api.pods += [_pod("rep-a", "5", 0, 6000), _pod("rep-b", "5", 0, 3000)]
    _started(running)
    got = {}
    for name in ("rep-b", "rep-a"):
        spec = _spec(name)
        got[name] = running.kubelet.admit_pod(spec)["c"]
        running.kubelet.start_container(spec, "c")
    assert got["rep-a"] != got["rep-b"]
    assert read_limits(running.region(got["rep-b"])).share_bp == 3000
    assert read_limits(running.region(got["rep-a"])).share_bp == 6000
    assert _owner(running.region(got["rep-b"])) == "u-rep-b"


def test_allocate_needs_no_api_server_and_prestart_waits_for_it(running: Running) -> None:
    """The API server away: Allocate still answers (closed limits), twice alike for the same
    devices; PreStartContainer fails UNAVAILABLE and succeeds once the API server is back."""
    running.api.pods.append(_pod("p", "1", 0, 5000))
    _started(running)
    running.api.fail_next = 1000
    spec = _spec("p")
    devices = running.kubelet.admit_pod(spec)["c"]
    region = running.region(devices)
    assert read_limits(region).share_bp == 0
    assert read_limits(region).memory_bytes == (0,)
    stub = running.kubelet.latest().stub
    again = stub.Allocate(
        pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=devices)]),
        timeout=30,
    ).container_responses[0]
    assert again == running.kubelet.manager.answers[spec.key, "c"]
    with pytest.raises(grpc.RpcError) as away:
        running.kubelet.start_container(spec, "c")
    assert away.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "ConnectionError: connection refused" in (away.value.details() or "")
    running.api.fail_next = 0
    running.kubelet.start_container(spec, "c")
    assert read_limits(region).share_bp == 5000


def test_after_a_reboot_prestart_rebuilds_the_regions(running: Running) -> None:
    """Regions gone (tmpfs) and the kubelet restarted: it starts the container from its
    checkpoint with no Allocate; PreStartContainer re-creates the region with its limits."""
    running.api.pods.append(_pod("p", "1", 1, 4000))
    _started(running)
    spec = _spec("p")
    devices = running.kubelet.admit_pod(spec)["c"]
    running.kubelet.start_container(spec, "c")
    calls = running.kubelet.manager.allocate_calls
    shutil.rmtree(running.root / "r")
    running.kubelet.restart()
    running.kubelet.wait(lambda: len(running.kubelet.endpoints) == 2, WAIT_S, "registered again")
    running.kubelet.start_container(spec, "c")
    assert running.kubelet.manager.allocate_calls == calls
    assert read_limits(running.region(devices)).share_bp == 4000


def test_an_init_container_and_its_app_container_share_one_region(running: Running) -> None:
    """The kubelet allocates the init container, then gives its devices to the app container
    (a second Allocate of the same devices): both are served, one region, the pod's limits."""
    running.api.pods.append(_pod("p", "1", 0, 2500))
    _started(running)
    spec = _spec("p", init=1)
    got = running.kubelet.admit_pod(spec)
    assert got["setup"] == got["c"]
    assert running.kubelet.manager.allocate_calls == 2
    running.kubelet.start_container(spec, "setup")
    running.kubelet.start_container(spec, "c")
    assert read_limits(running.region(got["c"])).share_bp == 2500


def test_a_region_stays_while_its_container_holds_the_devices(running: Running) -> None:
    """The pod deleted from the API server while the kubelet still runs it: its region stays;
    once the kubelet frees the devices, the region goes; a region not the plugin's stays."""
    running.api.pods.append(_pod("p", "1", 0, 5000))
    other = running.root / "r" / "demo_container"
    other.mkdir(parents=True)
    _started(running)
    spec = _spec("p")
    region = running.region(running.kubelet.admit_pod(spec)["c"])
    running.kubelet.start_container(spec, "c")
    running.api.pods.clear()
    scans = running.plugin.rescans
    running.kubelet.wait(lambda: running.plugin.rescans > scans + 2, WAIT_S, "a few scans")
    assert region.is_dir()
    running.kubelet.manager.remove(spec.key)
    running.kubelet.wait(lambda: not region.exists(), WAIT_S, "region removed")
    assert other.is_dir()


def test_another_plugin_holding_the_resource_is_warned_about(running: Running) -> None:
    """The kubelet's allocatable nvidia.com/gpu devices are another plugin's: logged, counted."""
    _started(running)
    running.kubelet.lister.extra = {contract.RESOURCE_GPU: ["GPU-other-0", "GPU-other-1"]}
    running.kubelet.wait(lambda: running.plugin.foreign_devices == 2, WAIT_S, "foreign devices")
    assert any("another device plugin" in line for line in running.logs)


def test_unhealthy_or_unknown_devices_are_refused_readably(running: Running) -> None:
    """Allocate of a device of an unhealthy GPU, or one never advertised: FAILED_PRECONDITION."""
    _started(running)
    sick = running.gpus.gpus[1]
    running.gpus.gpus = (running.gpus.gpus[0], replace(sick, healthy=False))
    running.kubelet.wait(lambda: "Unhealthy" in running.kubelet.devices().values(), WAIT_S, "sick")
    for device, reason in (("GPU-assumed-1::0", "unhealthy"), ("GPU-x::0", "not advertised")):
        request = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=[device])]
        )
        with pytest.raises(grpc.RpcError) as refused:
            running.kubelet.latest().stub.Allocate(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert reason in (refused.value.details() or "")


def _hami_pod(name: str, notes: dict[str, str], limits: dict[str, str]) -> PodInfo:
    """A pod on GPU 0 (30 percent, 1024 MiB) with ``notes`` beside its assignment."""
    gpu = AssignedGpu(0, "GPU-assumed-0", 1024, 3000)
    notes = {contract.ANNOTATION_ASSIGNMENT: PodAssignment(NODE, (gpu,)).to_json(), **notes}
    return PodInfo("ns", name, f"u-{name}", NODE, "1", notes, (("c", limits),))


def test_prestart_refuses_a_gpu_the_pods_selection_excludes(running: Running) -> None:
    """The kubelet gave the pod a GPU its nvidia.com/nouse-gpuuuid excludes (its assignment
    names that GPU): the container does not start, the kubelet reads why, the region stays
    closed and names no pod."""
    excluded = {"nvidia.com/nouse-gpuuuid": "GPU-assumed-0"}
    running.api.pods.append(_hami_pod("p", excluded, {contract.RESOURCE_GPU: "1"}))
    _started(running)
    spec = _spec("p")
    devices = running.kubelet.admit_pod(spec)["c"]
    assert devices[0].startswith("GPU-assumed-0::")
    with pytest.raises(grpc.RpcError) as refused:
        running.kubelet.start_container(spec, "c")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.details() == (
        "arkgpu device plugin: pod ns/p: GPU GPU-assumed-0 is excluded by annotation "
        "nvidia.com/nouse-gpuuuid"
    )
    assert read_limits(running.region(devices)).share_bp == 0
    assert not (running.region(devices) / "pod.json").exists()


def test_prestart_gives_hami_pods_their_semantics_and_names(running: Running) -> None:
    """Memory without gpucores: no compute cap; no ArkGPU class: not elastic; a class and
    gpucores: the share is kept and the pod is elastic. pod.json names the container."""
    memory_only = {contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM: "1024"}
    cores = {contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUCORES: "30"}
    running.api.pods += [
        _hami_pod("hami", {}, memory_only),
        _hami_pod("classed", {contract.ANNOTATION_QOS: "be"}, cores),
    ]
    _started(running)
    found = {}
    for name in ("hami", "classed"):
        spec = _spec(name)
        region = running.region(running.kubelet.admit_pod(spec)["c"])
        running.kubelet.start_container(spec, "c")
        found[name] = (read_limits(region), json.loads((region / "pod.json").read_text()))
    limits, body = found["hami"]
    assert (limits.share_bp, limits.memory_bytes) == (10_000, (1024 * MIB,))
    assert (body["elastic"], body["gpu"], body["gpus"]) == (False, 0, [0])
    assert (body["namespace"], body["pod"], body["container"]) == ("ns", "hami", "c")
    limits, body = found["classed"]
    assert (limits.share_bp, body["elastic"]) == (3000, True)


def test_an_init_container_with_fewer_devices_gets_its_own_region_and_name(
    running: Running,
) -> None:
    """A one-GPU init container (memory only) before a two-GPU app container: its region
    names it and is not capped in compute; the app container's holds the pod's share."""
    gpus = (
        AssignedGpu(0, "GPU-assumed-0", 1024, 4000),
        AssignedGpu(1, "GPU-assumed-1", 2048, 4000),
    )
    notes = {contract.ANNOTATION_ASSIGNMENT: PodAssignment(NODE, gpus).to_json()}
    app = {contract.RESOURCE_GPU: "2", contract.RESOURCE_GPUCORES: "40"}
    setup = {contract.RESOURCE_GPU: "1", contract.RESOURCE_GPUMEM: "1024"}
    running.api.pods.append(
        PodInfo("ns", "p", "u-p", NODE, "1", notes, (("c", app),), (("setup", setup),))
    )
    _started(running)
    spec = PodSpec("ns", "p", (("c", 2),), (("setup", 1),))
    got = running.kubelet.admit_pod(spec)
    assert set(got["setup"]) < set(got["c"])
    for container in ("setup", "c"):
        running.kubelet.start_container(spec, container)
    init, main = running.region(got["setup"]), running.region(got["c"])
    assert json.loads((init / "pod.json").read_text())["container"] == "setup"
    assert read_limits(init).share_bp == 10_000
    assert json.loads((main / "pod.json").read_text())["container"] == "c"
    assert read_limits(main).share_bp == 4000
