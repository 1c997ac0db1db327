"""The plugin in-process (real gRPC over Unix sockets, the kubelet emulator) with an in-memory
API server: pod choice over several Allocates, readable failures, a kubelet that starts late."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.plugin import DevicePlugin
from arkgpu.k8s.deviceplugin.wire import pb
from arkgpu.k8s.gpus import AssumedGpus
from arkgpu.k8s.inventory import InventoryPublisher
from arkgpu.limiter.region import read_limits
from k8s.kubelet_emulator import KubeletEmulator

from .fake_apiserver import MemoryApi

NODE = "n1"
WAIT_S = 30.0


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


def _pod(name: str, created: str, index: int, share: int) -> PodInfo:
    gpu = AssignedGpu(index, f"GPU-assumed-{index}", 1024, share)
    notes = {contract.ANNOTATION_ASSIGNMENT: PodAssignment(NODE, (gpu,)).to_json()}
    return PodInfo("ns", name, f"u-{name}", NODE, created, notes, (("c", {}),))


@pytest.fixture
def running() -> Iterator[Running]:
    """The plugin looping in a thread; the emulator started only by the test."""
    root = Path(tempfile.mkdtemp(prefix="dps-", dir="/tmp"))
    (root / "k").mkdir()
    config = DevicePluginConfig(
        node_name=NODE,
        kubelet_dir=root / "k",
        regions_dir=root / "r",
        library_path=Path("/lib/x.so"),
        split_count=2,
        inventory_period_s=0.1,
        kubelet_check_s=0.1,
    )
    api, gpus, logs = MemoryApi(), Gpus(), list[str]()
    plugin = DevicePlugin(
        config, gpus, api, InventoryPublisher(api, NODE, lambda: "t"), logs.append
    )
    stop = threading.Event()
    thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
    thread.start()
    kubelet = KubeletEmulator(root / "k")
    try:
        yield Running(plugin, kubelet, api, gpus, root)
    finally:
        stop.set()
        thread.join(timeout=WAIT_S)
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not thread.is_alive()


def _registered(r: Running) -> None:
    r.kubelet.wait(lambda: r.kubelet.endpoints and r.kubelet.devices(), WAIT_S, "devices")


def test_registers_with_a_kubelet_that_starts_after_the_plugin(running: Running) -> None:
    """No kubelet.sock at first: the plugin waits, then registers once it appears."""
    running.kubelet.wait(lambda: running.plugin.registrations == 0, 1.0, "not yet")
    running.kubelet.start()
    _registered(running)
    assert running.plugin.registrations == 1
    assert len(running.kubelet.devices()) == 4


def test_allocates_pending_pods_oldest_first_each_its_own_region(running: Running) -> None:
    """Two pods waiting for one device each: the older is allocated first, then the other."""
    running.api.pods += [
        _pod("young", "2026-12-04T10:00:02Z", 1, 2000),
        _pod("old", "2026-12-04T10:00:01Z", 0, 7000),
    ]
    running.kubelet.start()
    _registered(running)
    first, _ = running.kubelet.admit(1)
    second, _ = running.kubelet.admit(1)
    assert (first[0].split("::")[0], second[0].split("::")[0]) == ("GPU-assumed-0", "GPU-assumed-1")
    assert read_limits(running.root / "r" / "ns_old_c").share_bp == 7000
    assert read_limits(running.root / "r" / "ns_young_c").share_bp == 2000
    for name in ("old", "young"):
        assert contract.ANNOTATION_ALLOCATED in running.api.pod("ns", name).annotations


def test_failures_reach_the_kubelet_as_readable_errors(running: Running) -> None:
    """The API server away: UNAVAILABLE naming the cause, and a retry succeeds; an assigned GPU
    gone unhealthy: FAILED_PRECONDITION naming the pod and the GPU."""
    running.api.pods.append(_pod("p", "1", 0, 5000))
    running.kubelet.start()
    _registered(running)
    running.api.fail_next = 2  # the preferred allocation (tolerated), then Allocate
    with pytest.raises(grpc.RpcError) as away:
        running.kubelet.admit(1)
    assert away.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "Allocate failed: ConnectionError: connection refused" in away.value.details()
    running.kubelet.admit(1)

    running.api.pods.append(_pod("q", "2", 1, 5000))
    sick = running.gpus.gpus[1]
    running.gpus.gpus = (
        running.gpus.gpus[0],
        InventoryGpu(1, sick.uuid, sick.model, sick.memory_mib, healthy=False),
    )
    running.kubelet.wait(lambda: "Unhealthy" in running.kubelet.devices().values(), WAIT_S, "sick")
    endpoint = running.kubelet.latest()
    with pytest.raises(grpc.RpcError) as refused:
        endpoint.stub.Allocate(
            pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=["GPU-assumed-0::1"])]
            ),
            timeout=30,
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "pod ns/q: assigned GPU GPU-assumed-1 is unhealthy on node n1" in refused.value.details()


def test_regions_of_deleted_pods_are_removed_others_kept(running: Running) -> None:
    """A pod deleted from the API server: its region goes at a later scan. A live pod's region
    and a region the plugin did not create (no pod UID in its pod.json) stay."""
    running.api.pods += [_pod("gone", "1", 0, 5000), _pod("stays", "2", 1, 5000)]
    foreign = running.root / "r" / "demo_container"
    foreign.mkdir(parents=True)
    (foreign / "pod.json").write_text('{"kind": "be", "gpu": 0, "model": "m"}')
    running.kubelet.start()
    _registered(running)
    running.kubelet.admit(1)
    running.kubelet.admit(1)
    regions = running.root / "r"
    assert (regions / "ns_gone_c").is_dir()
    running.api.pods = [p for p in running.api.pods if p.name != "gone"]
    running.kubelet.wait(lambda: not (regions / "ns_gone_c").exists(), WAIT_S, "region removed")
    assert (regions / "ns_stays_c" / "limits").is_file()
    assert foreign.is_dir()
