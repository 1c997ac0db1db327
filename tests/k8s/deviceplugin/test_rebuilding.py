"""Issue 32: regions of containers the kubelet started without PreStartContainer (kubelet
1.37.2 skips it between its restart and the plugin's registration) are rebuilt from the
kubelet's PodResources API, at the plugin's start and at each scan; a settled region is
never touched. Real gRPC over Unix sockets: the kubelet emulator serves the device plugin
API's kubelet side and PodResources; the API server is in memory."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from arkgpu.k8s.deviceplugin.allocating import region_key
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.plugin import DevicePlugin
from arkgpu.k8s.deviceplugin.podresources import PodResourcesClient
from arkgpu.k8s.inventory import InventoryPublisher
from arkgpu.limiter.region import read_limits
from k8s.kubelet_emulator import KubeletEmulator

from .fake_apiserver import MemoryApi
from .test_service import NODE, WAIT_S, Gpus, _pod, _spec


@dataclass
class Node:
    """A node: the kubelet emulator, the API server, and plugins started by the test."""

    root: Path
    config: DevicePluginConfig
    kubelet: KubeletEmulator
    api: MemoryApi = field(default_factory=MemoryApi)
    logs: list[str] = field(default_factory=list)
    stops: list[Callable[[], None]] = field(default_factory=list)

    def start_plugin(self, period_s: float = 0.1) -> tuple[DevicePlugin, Callable[[], None]]:
        """A plugin looping in a thread, scanning every ``period_s``; and its stop."""
        config = replace(self.config, inventory_period_s=period_s)
        holders = PodResourcesClient(config.pod_resources_socket)
        inventory = InventoryPublisher(self.api, NODE, lambda: "t")
        plugin = DevicePlugin(config, Gpus(), self.api, holders, inventory, self.logs.append)
        halt = threading.Event()
        thread = threading.Thread(target=plugin.run, args=(halt,), daemon=True)
        thread.start()

        def stop() -> None:
            halt.set()
            thread.join(timeout=WAIT_S)
            assert not thread.is_alive()

        self.stops.append(stop)
        return plugin, stop

    def region(self, devices: list[str]) -> Path:
        return self.config.regions_dir / region_key(devices)

    def settled(self, devices: list[str]) -> bool:
        return (self.region(devices) / "pod.json").is_file()


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dpr-", dir="/tmp"))
    (root / "k").mkdir()
    (root / "dev").mkdir()
    config = DevicePluginConfig(
        node_name=NODE,
        kubelet_dir=root / "k",
        regions_dir=root / "r",
        library_path=Path("/lib/x.so"),
        preload_file=root / "preload",
        pod_resources_socket=root / "k" / "pod-resources.sock",
        dev_root=root / "dev",
        region_grace_s=3600.0,
        split_count=2,
        kubelet_check_s=0.1,
    )
    kubelet = KubeletEmulator(root / "k", config.pod_resources_socket)
    found = Node(root, config, kubelet)
    try:
        yield found
    finally:
        for stop in found.stops:
            stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def _admitted(node: Node, name: str, index: int, share: int) -> list[str]:
    """Pod ``name`` (GPU ``index``, ``share`` bp) admitted by the kubelet: its devices. Its
    container is never started through the emulator: no PreStartContainer, as in the window."""
    node.api.pods.append(_pod(name, "1", index, share))
    node.kubelet.wait(lambda: node.kubelet.endpoints and node.kubelet.devices(), WAIT_S, "devices")
    return node.kubelet.admit_pod(_spec(name))["c"]


def _reboot_removes(regions: Path) -> None:
    """The regions vanish at once, as at a reboot (tmpfs): renamed away first, so that a
    scan running meanwhile never meets a half-removed tree."""
    gone = regions.with_name(regions.name + ".gone")
    regions.rename(gone)
    shutil.rmtree(gone)


def test_a_container_started_without_prestart_gets_its_pods_region_at_a_scan(node: Node) -> None:
    """Allocate left closed limits and no pod.json; the kubelet (in the window) starts the
    container without PreStartContainer: the next scan gives the region its pod's limits and
    pod.json. After a reboot (regions gone, the kubelet restarted) the scan builds it again."""
    node.kubelet.start()
    plugin, _ = node.start_plugin()
    devices = _admitted(node, "p", 1, 4000)
    node.kubelet.wait(lambda: node.settled(devices), WAIT_S, "region settled by a scan")
    assert read_limits(node.region(devices)).share_bp == 4000
    body = json.loads((node.region(devices) / "pod.json").read_text())
    assert (body["pod"], body["container"], body["gpus"]) == ("p", "c", [1])
    _reboot_removes(node.config.regions_dir)
    node.kubelet.restart()
    node.kubelet.wait(lambda: node.settled(devices), WAIT_S, "region rebuilt after a reboot")
    limits = read_limits(node.region(devices))
    assert (limits.share_bp, limits.memory_bytes) == (4000, (2048 << 20,))
    assert plugin.rebuilt == 2
    assert any("region " + region_key(devices) + " rebuilt" in line for line in node.logs)


def test_the_plugins_start_rebuilds_regions_before_any_scan(node: Node) -> None:
    """A plugin started after the reboot, scanning only hourly: its start-up pass builds the
    region of the container the kubelet lists."""
    node.kubelet.start()
    _, stop = node.start_plugin()
    devices = _admitted(node, "p", 0, 2500)
    stop()
    shutil.rmtree(node.config.regions_dir)
    node.start_plugin(period_s=3600.0)
    node.kubelet.wait(lambda: node.settled(devices), WAIT_S, "region built at start")
    assert read_limits(node.region(devices)).share_bp == 2500


def test_a_settled_region_is_never_touched_and_a_refused_pod_is_logged_once(
    node: Node,
) -> None:
    """Scans after the region is settled leave its usage (counters a process wrote: here a
    marker) and limits byte for byte; a pod the API server no longer has is logged once,
    not at every scan, and gets no region."""
    node.kubelet.start()
    plugin, _ = node.start_plugin()
    devices = _admitted(node, "p", 1, 4000)
    node.kubelet.wait(lambda: node.settled(devices), WAIT_S, "region settled")
    region = node.region(devices)
    with (region / "usage").open("r+b") as usage:
        usage.seek(-8, 2)
        usage.write(b"counters")
    before = [(p.stat().st_ino, p.read_bytes()) for p in (region / "usage", region / "limits")]
    gone = _admitted(node, "q", 0, 3000)
    node.api.pods.pop()
    shutil.rmtree(node.region(gone))
    scans = plugin.rescans
    node.kubelet.wait(lambda: plugin.rescans > scans + 3, WAIT_S, "a few scans")
    after = [(p.stat().st_ino, p.read_bytes()) for p in (region / "usage", region / "limits")]
    assert after == before
    assert not node.region(gone).exists()
    refused = [line for line in node.logs if region_key(gone) in line and "not rebuilt" in line]
    assert len(refused) == 1, refused
    assert "not rebuilt (next scan): pod ns/q is not running on n1" in refused[0]
