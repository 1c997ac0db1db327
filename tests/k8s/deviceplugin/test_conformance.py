"""Conformance: ``arkgpu device-plugin run`` (a real process) against the kubelet emulator.

Real Unix sockets, real gRPC from the vendored proto, the project's fake
libnvidia-ml for the GPUs and their health, and an HTTP fake of the three API
server calls the plugin makes (tests/e2e repeats the pod path on the real
control plane). Pins: registration (version, resource, endpoint, options),
ListAndWatch (initial list, a GPU lost and back), GetPreferredAllocation and
Allocate for an assigned pod (environment, mounts, device nodes, the region
and its limits, the pod's allocated annotation), a readable error when no pod
waits, and re-registration after a kubelet restart.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, NodeInventory, PodAssignment
from arkgpu.k8s.deviceplugin.allocating import pod_description, region_key
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.wire import pb
from arkgpu.limiter import native
from arkgpu.limiter.region import read_limits
from arkgpu.node.pods import read_pod
from k8s.device_manager import PodSpec
from k8s.kubelet_emulator import KubeletEmulator, check_list

from .fake_apiserver import HttpApiServer, pod_json, serving

NODE = "node-a"
SPLIT = 4
WAIT_S = 60.0
"""Generous bound for anything the plugin does on a loaded 2-core machine (seconds)."""


@dataclass
class Setup:
    """One plugin process and what it talks to."""

    kubelet: KubeletEmulator
    api: HttpApiServer
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    fake_state: Path
    regions: Path
    library: Path
    root: Path


def _config(root: Path, kubeconfig: Path, regions: Path, library: Path, port: int) -> Path:
    text = f"""
node_name = "{NODE}"
kubeconfig = "{kubeconfig}"
kubelet_dir = "{root / "kubelet"}"
regions_dir = "{regions}"
library_path = "{library}"
split_count = {SPLIT}
inventory_period_s = 0.2
kubelet_check_s = 0.2
listen_address = "127.0.0.1"
port = {port}
preload_file = "{root / "preload"}"
pod_resources_socket = "{root / "kubelet" / "pod-resources.sock"}"
dev_root = "{root / "dev"}"
"""
    path = root / "plugin.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def setup() -> Iterator[Setup]:
    """The emulator serving, the fake API server with node-a, the plugin on 2 fake GPUs."""
    root = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))  # short: Unix socket paths
    (root / "kubelet").mkdir()
    (root / "dev").mkdir()
    for node in ("nvidia4", "nvidia5", "nvidiactl", "nvidia-uvm"):  # no nvidia-uvm-tools
        (root / "dev" / node).touch()
    kubelet = KubeletEmulator(root / "kubelet")
    kubelet.start()
    api = HttpApiServer()
    api.add_node(NODE)
    fake_state = root / "fakegpu"
    env = native.container_env(None, fake_state, preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="8192", FAKEGPU_NVML_MINOR_OFFSET="4")
    library = native.limiter_library()
    with serving(api, root / "kubeconfig") as _:
        port = _free_port()
        config = _config(root, root / "kubeconfig", root / "regions", library, port)
        arkgpu = Path(sys.executable).with_name("arkgpu")
        log = root / "plugin.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [str(arkgpu), "device-plugin", "run", "--config", str(config)],
                env=env,
                stderr=sink,
            )
        try:
            yield Setup(
                kubelet, api, process, port, log, fake_state, root / "regions", library, root
            )
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            kubelet.stop()
            shutil.rmtree(root, ignore_errors=True)


def _health(kubelet: KubeletEmulator, gpu: str) -> set[str]:
    return {h for d, h in kubelet.devices().items() if d.startswith(f"{gpu}::")}


def test_registers_and_lists_devices_with_health_from_nvml(setup: Setup) -> None:
    """Register: v1beta1, nvidia.com/gpu, its socket, preferred allocation on. ListAndWatch:
    4 devices per fake GPU, all Healthy; a GPU NVML reports lost turns Unhealthy, then
    Healthy again; the node's inventory annotation follows."""
    kubelet = setup.kubelet
    kubelet.wait(lambda: kubelet.endpoints, WAIT_S, "registration")
    request = kubelet.latest().request
    assert (request.version, request.resource_name) == ("v1beta1", contract.RESOURCE_GPU)
    assert request.endpoint == "arkgpu.sock"
    assert request.options.get_preferred_allocation_available
    assert request.options.pre_start_required
    kubelet.wait(kubelet.devices, WAIT_S, "first device list")
    listed = kubelet.devices()
    check_list(listed)
    expected = {f"GPU-fake-{g}::{k}" for g in range(2) for k in range(SPLIT)}
    assert set(listed) == expected
    assert set(listed.values()) == {"Healthy"}

    lost = Path(f"{setup.fake_state}.lost-1")
    lost.touch()
    kubelet.wait(lambda: _health(kubelet, "GPU-fake-1") == {"Unhealthy"}, WAIT_S, "GPU 1 lost")
    assert _health(kubelet, "GPU-fake-0") == {"Healthy"}
    assert set(kubelet.devices()) == expected  # the same devices, not fewer

    def inventory() -> NodeInventory | None:
        text = setup.api.annotations(setup.api.nodes[NODE]).get(contract.ANNOTATION_INVENTORY)
        found = NodeInventory.from_json(text) if text else None
        return found if found and not found.gpus[1].healthy else None

    shown = kubelet.wait(inventory, WAIT_S, "inventory with GPU 1 unhealthy")
    assert [(g.uuid, g.memory_mib, g.healthy) for g in shown.gpus] == [
        ("GPU-fake-0", 8192, True),
        ("GPU-fake-1", 8192, False),
    ]
    assert set(setup.api.patch_types) == {"application/merge-patch+json"}
    lost.unlink()
    kubelet.wait(lambda: _health(kubelet, "GPU-fake-1") == {"Healthy"}, WAIT_S, "GPU 1 back")


def _assigned_pod(name: str, share_bp: int, memory_mib: int) -> dict[str, object]:
    assignment = PodAssignment(NODE, (AssignedGpu(1, "GPU-fake-1", memory_mib, share_bp),))
    notes = {contract.ANNOTATION_ASSIGNMENT: assignment.to_json()}
    return pod_json("team", name, NODE, notes)


def test_allocate_then_prestart_give_the_pods_region_env_mounts_and_devices(setup: Setup) -> None:
    """A pod assigned GPU 1 at 30% and 2048 MiB: the preferred device is one of GPU 1's.
    Allocate answers the environment (no LD_PRELOAD), mounts (the library, ld.so.preload,
    the region) and the device nodes that exist, by minor number, and makes a closed region;
    PreStartContainer, the pod found through PodResources, gives the region the pod's limits
    and pod.json. A device the plugin never advertised is refused with a readable reason."""
    kubelet = setup.kubelet
    setup.api.add_pod(_assigned_pod("infer", 3000, 2048))
    kubelet.wait(lambda: kubelet.endpoints, WAIT_S, "registration")
    kubelet.wait(kubelet.devices, WAIT_S, "first device list")
    pod = PodSpec("team", "infer", (("main", 1),))
    chosen = kubelet.admit_pod(pod)["main"]
    response = kubelet.manager.answers[pod.key, "main"]
    assert len(chosen) == 1
    assert chosen[0].startswith("GPU-fake-1::")
    assert dict(response.envs) == {
        "ARKGPU_REGION_DIR": "/run/arkgpu/region",
        "CUDA_VISIBLE_DEVICES": "GPU-fake-1",
        "NVIDIA_VISIBLE_DEVICES": "GPU-fake-1",
    }
    region = setup.regions / region_key(chosen)
    preload = setup.root / "preload"
    mounts = {(m.container_path, m.host_path, m.read_only) for m in response.mounts}
    assert mounts == {
        (str(setup.library), str(setup.library), True),
        ("/etc/ld.so.preload", str(preload), True),
        ("/run/arkgpu/region", str(region), False),
        ("/run/arkgpu/region/limits", str(region / "limits"), True),
    }
    assert preload.read_text() == f"{setup.library}\n"
    assert [d.container_path for d in response.devices] == [
        "/dev/nvidia5",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
    ]
    assert read_limits(region).share_bp == 0
    kubelet.start_container(pod, "main")
    limits = read_limits(region)
    assert limits.share_bp == 3000
    assert limits.memory_bytes == (2048 << 20,)
    spec = read_pod(region)
    assert (spec.kind, spec.gpu, spec.memory_mib) == ("be", 1, 2048)

    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=["GPU-other::0"])]
    )
    with pytest.raises(grpc.RpcError) as refused:
        kubelet.latest().stub.Allocate(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "device GPU-other::0 is not advertised here" in (refused.value.details() or "")

    assert _get(setup.port, "/healthz") == (200, "ok\n")
    assert _get(setup.port, "/readyz") == (200, "ok\n")
    status, metrics = _get(setup.port, "/metrics")
    assert status == 200
    for line in (
        "arkgpu_device_plugin_registrations_total 1.0",
        "arkgpu_device_plugin_allocations_total 1.0",
        "arkgpu_device_plugin_allocate_refusals_total 1.0",
        "arkgpu_device_plugin_prestarts_total 1.0",
        "arkgpu_device_plugin_foreign_devices 0.0",
        'arkgpu_device_plugin_gpus{health="healthy"} 2.0',
        'arkgpu_device_plugin_gpus{health="unhealthy"} 0.0',
    ):
        assert line in metrics.splitlines()


def test_reregisters_after_kubelet_restart_and_leaves_on_sigterm(setup: Setup) -> None:
    """The kubelet restarts (every socket deleted, a new kubelet.sock): the plugin serves a
    new socket and registers again, and the new stream lists the devices. SIGTERM: exit 0,
    socket removed."""
    kubelet = setup.kubelet
    kubelet.wait(lambda: kubelet.latest().lists if kubelet.endpoints else None, WAIT_S, "list")
    kubelet.stop()
    (kubelet.directory / "kubelet.sock").unlink(missing_ok=True)  # gRPC may remove it
    assert _get(setup.port, "/readyz") == (503, "not registered\n")
    kubelet.restart()
    kubelet.wait(lambda: len(kubelet.endpoints) >= 2, WAIT_S, "registration after restart")
    kubelet.wait(lambda: kubelet.endpoints[-1].lists, WAIT_S, "list after restart")
    assert len(kubelet.devices()) == 2 * SPLIT
    socket = kubelet.directory / "arkgpu.sock"
    assert socket.exists()
    setup.process.send_signal(signal.SIGTERM)
    assert setup.process.wait(timeout=WAIT_S) == 0
    assert not socket.exists()
    assert setup.log.read_text().count("registered nvidia.com/gpu with the kubelet") == 2
    assert os.path.exists(kubelet.socket)


def test_without_nvml_the_plugin_stays_up_unready_with_the_reason(tmp_path: Path) -> None:
    """No driver libraries in the container (no NVIDIA container toolkit): the process does
    not exit and restart in a loop; /readyz answers 503 naming NVML and the fix, /healthz 200,
    nothing registers with the kubelet."""
    root = Path(tempfile.mkdtemp(prefix="dpn-", dir="/tmp"))
    (root / "kubelet").mkdir()
    kubelet = KubeletEmulator(root / "kubelet")
    kubelet.start()
    api = HttpApiServer()
    api.add_node(NODE)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    with serving(api, root / "kubeconfig") as _:
        port = _free_port()
        config = _config(root, root / "kubeconfig", root / "regions", root / "lib.so", port)
        arkgpu = Path(sys.executable).with_name("arkgpu")
        with (root / "plugin.log").open("wb") as sink:
            process = subprocess.Popen(
                [str(arkgpu), "device-plugin", "run", "--config", str(config)],
                env=env,
                stderr=sink,
            )
        try:
            status, text = kubelet.wait(
                lambda: (got := _get_or_none(port, "/readyz")) and "NVML" in got[1] and got,
                WAIT_S,
                "unready answer",
            )
            assert status == 503
            assert "NVIDIA container toolkit" in text
            assert _get(port, "/healthz") == (200, "ok\n")
            assert process.poll() is None
            assert kubelet.endpoints == []
            assert "not ready, retried every" in (root / "plugin.log").read_text()
        finally:
            process.terminate()
            process.wait(timeout=30)
            kubelet.stop()
            shutil.rmtree(root, ignore_errors=True)


def _get_or_none(port: int, path: str) -> tuple[int, str] | None:
    try:
        return _get(port, path)
    except OSError:
        return None


def test_pod_json_matches_node_runtime_format(tmp_path: Path) -> None:
    """The region description is what arkgpu.node.pods parses (kept in sync by this test)."""
    assignment = PodAssignment(NODE, (AssignedGpu(0, "GPU-x", 0, 5000),), qos="lc")
    notes = {
        contract.ANNOTATION_LATENCY_TARGET_MS: "25",
        contract.ANNOTATION_PEAK_RPS: "300",
        contract.ANNOTATION_MODEL: "resnet50",
        contract.ANNOTATION_MAX_BATCH: "16",
    }
    pod = PodInfo("ns", "p", "u", NODE, "2026", notes)
    description = pod_description(pod, assignment, [0, 2], 0, "main")
    (tmp_path / "pod.json").write_text(json.dumps(description))
    spec = read_pod(tmp_path)
    assert (spec.kind, spec.model, spec.target_ms, spec.peak_rps, spec.max_batch) == (
        "lc",
        "resnet50",
        25.0,
        300.0,
        16,
    )
    assert spec.memory_mib is None
    assert (spec.gpu, spec.gpus, spec.elastic) == (0, (0, 2), False)  # no arkgpu.io/qos
    assert spec.label == "ns/p/main"
    classed = PodInfo("ns", "p", "u", NODE, "2026", {**notes, contract.ANNOTATION_QOS: "lc"})
    description = pod_description(classed, assignment, [1], 0, "main")
    (tmp_path / "pod.json").write_text(json.dumps(description))
    assert read_pod(tmp_path).elastic is True
