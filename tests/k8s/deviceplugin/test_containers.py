"""What Allocate answers for a container: CDI devices or device nodes, the preload file, and
which regions the collection removes (pure code over a temporary folder)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.containers import (
    container_response,
    folder_marks,
    open_region,
    settle_region,
    stale_regions,
    unchanged,
    write_preload_file,
)
from arkgpu.k8s.deviceplugin.plugin import kubelet_up_s
from arkgpu.limiter.region import Limits, read_limits


def _config(tmp_path: Path, **kwargs: object) -> DevicePluginConfig:
    return DevicePluginConfig(
        node_name="n",
        dev_root=tmp_path / "dev",
        preload_file=tmp_path / "run" / "ld.so.preload",
        library_path=Path("/opt/lib.so"),
        **kwargs,  # type: ignore[arg-type]
    )


def test_cdi_strategy_names_cdi_devices_and_no_device_nodes(tmp_path: Path) -> None:
    """With device_list_strategy cdi: one ``<cdi_kind>=<uuid>`` per GPU, no device nodes."""
    config = _config(tmp_path, device_list_strategy="cdi", cdi_kind="nvidia.com/gpu")
    answer = container_response(config, ["GPU-a", "GPU-b"], [0, 1], tmp_path / "r")
    assert [d.name for d in answer.cdi_devices] == ["nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"]
    assert list(answer.devices) == []
    assert "LD_PRELOAD" not in answer.envs


def test_device_nodes_are_named_only_where_they_exist(tmp_path: Path) -> None:
    """A node without nvidia-uvm(-tools) loaded: they are left out, not named blindly."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia3").touch()
    (tmp_path / "dev" / "nvidiactl").touch()
    answer = container_response(_config(tmp_path), ["GPU-a"], [3], tmp_path / "r")
    assert [(d.container_path, d.host_path) for d in answer.devices] == [
        ("/dev/nvidia3", "/dev/nvidia3"),
        ("/dev/nvidiactl", "/dev/nvidiactl"),
    ]


def test_the_preload_file_names_the_library(tmp_path: Path) -> None:
    """One line: the library's path (ld.so.preload's format), readable by every user."""
    config = _config(tmp_path)
    write_preload_file(config)
    assert config.preload_file.read_text() == "/opt/lib.so\n"
    assert config.preload_file.stat().st_mode & 0o777 == 0o644


def test_only_unheld_plugin_regions_past_the_grace_are_stale(tmp_path: Path) -> None:
    """Held regions, young regions and folders not named dev-* stay."""
    for name in ("dev-held", "dev-free", "dev-young", "demo"):
        (tmp_path / name).mkdir()
    old = time.time() - 100
    for name in ("dev-held", "dev-free", "demo"):
        os.utime(tmp_path / name, (old, old))
    found = stale_regions(tmp_path, {"dev-held"}, 60.0)
    assert [f.name for f in found] == ["dev-free"]


def test_a_settled_region_no_container_holds_is_stale_at_once_under_a_settled_kubelet(
    tmp_path: Path,
) -> None:
    """A region whose container started (``pod.json``) and that no container holds goes at
    the next scan, however fresh its folder; a held one and a fresh unsettled one stay."""
    limits, pod = Limits((1 << 30,), share_bp=3000), {"kind": "be", "pod_uid": "u"}
    for name in ("dev-gone", "dev-held"):
        settle_region(open_region(tmp_path, name, 1), limits, pod)
    open_region(tmp_path, "dev-starting", 1)
    found = stale_regions(tmp_path, {"dev-held"}, 60.0, kubelet_up_s=61.0)
    assert [f.name for f in found] == ["dev-gone"]


def test_no_settled_region_is_stale_while_the_kubelet_is_young(tmp_path: Path) -> None:
    """A kubelet up for less than the grace may not list its pods yet: a settled region is
    kept, however old, until the kubelet has been up for the grace."""
    region = open_region(tmp_path, "dev-x", 1)
    settle_region(region, Limits((1 << 30,), share_bp=3000), {"kind": "be", "pod_uid": "u"})
    old = time.time() - 1000
    os.utime(region, (old, old))
    assert stale_regions(tmp_path, set(), 60.0, kubelet_up_s=5.0) == []
    assert stale_regions(tmp_path, set(), 60.0, kubelet_up_s=0.0) == []
    assert [f.name for f in stale_regions(tmp_path, set(), 60.0, kubelet_up_s=60.5)] == ["dev-x"]


def test_a_region_opened_again_after_it_was_listed_is_no_longer_stale(tmp_path: Path) -> None:
    """Listed as stale (its pod gone), then Allocate opens it again for a new pod before the
    plugin removes it: the mark taken at listing no longer matches, so it stays; an untouched
    one still goes."""
    limits, pod = Limits((1 << 30,), share_bp=3000), {"kind": "be", "pod_uid": "old"}
    for name in ("dev-reused", "dev-gone"):
        region = open_region(tmp_path, name, 1)
        settle_region(region, limits, pod)
        old = time.time() - 100
        os.utime(region, (old, old))
    listed = stale_regions(tmp_path, set(), 60.0, kubelet_up_s=61.0)
    marks = folder_marks(listed)
    open_region(tmp_path, "dev-reused", 1)
    assert [f.name for f in unchanged(marks)] == ["dev-gone"]


def test_the_kubelet_is_up_since_its_socket_was_made(tmp_path: Path) -> None:
    """``kubelet_up_s``: 0 without a socket; the socket's age otherwise."""
    path = tmp_path / "kubelet.sock"
    assert kubelet_up_s(path) == 0.0
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert 0.0 <= kubelet_up_s(path) < 30.0
        old = time.time() - 500
        os.utime(path, (old, old))
        assert 490.0 < kubelet_up_s(path) < 530.0


def test_a_region_allocated_again_is_closed_and_without_the_old_pod(tmp_path: Path) -> None:
    """The devices of a pod that ended are allocated to a new pod: the region keeps nothing of
    the old one (limits closed, no pod.json for the node runtime to adopt) and is fresh."""
    first = open_region(tmp_path, "dev-x", 1)
    settle_region(first, Limits((1 << 30,), share_bp=5000), {"kind": "be", "pod_uid": "old"})
    old = time.time() - 1000
    os.utime(first, (old, old))
    again = open_region(tmp_path, "dev-x", 1)
    assert read_limits(again).share_bp == 0
    assert read_limits(again).memory_bytes == (0,)
    assert not (again / "pod.json").exists()
    assert stale_regions(tmp_path, set(), 60.0) == []


def test_settling_replaces_the_empty_folders_a_runtime_made_for_missing_mount_sources(
    tmp_path: Path,
) -> None:
    """A container started before its region existed: the runtime made the bind mounts'
    sources as folders (``limits``, the region); settling makes the real files there."""
    region = tmp_path / "dev-x"
    (region / "limits").mkdir(parents=True)
    settle_region(region, Limits((1 << 30,), share_bp=5000), {"kind": "be"})
    assert read_limits(region).share_bp == 5000
    assert (region / "usage").is_file()
    assert (region / "pod.json").is_file()
