"""Prepare of claims beyond one plain request: ``firstAvailable`` subrequests, a request
for several devices, configuration aimed at a main request, and the device nodes
(minor numbers, host paths, existence) of the CDI spec."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.claims import ClaimError, Qos, shares
from arkgpu.limiter import read_limits
from arkgpu.node.pods import parse_pod

from . import kubelet
from .test_plugin import DRIVER, MIB, Claims, allocated_claim, fake_dev, make_preparer, start

CDI_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
"""A CDI device name: alphanumerics, '_', '-', '.', ':' (no '/'), alphanumeric at both ends."""

TWO_GPUS = {
    0: InventoryGpu(0, "GPU-fake-0", "fake", 16_384, minor=0),
    1: InventoryGpu(1, "GPU-fake-1", "fake", 16_384, minor=1),
}


def result(request: str, device: str, share: str, memory: str = "2Gi") -> dict[str, Any]:
    """One allocation result of ours on ``device``."""
    return {
        "request": request,
        "driver": DRIVER,
        "pool": "node-1",
        "device": device,
        "shareID": share,
        "consumedCapacity": {"memory": memory, "cores": "20"},
    }


def claim_with(*results: dict[str, Any]) -> dict[str, Any]:
    """The test claim (LC config for requests ["gpu"]) with these results."""
    claim = allocated_claim()
    claim["status"]["allocation"]["devices"]["results"] = list(results)
    return claim


def spec_of(workdir: Path) -> dict[str, Any]:
    return dict(json.loads((workdir / "cdi" / "arkgpu-dra-uid-1.json").read_text()))


def test_a_first_available_result_gets_a_valid_region_and_cdi_name_and_the_main_config(
    workdir: Path,
) -> None:
    """kube-scheduler names the result ``gpu/large``: the region is one folder named after the
    main request, the CDI name has no '/', the LC config aimed at ``gpu`` applies."""
    claim = claim_with(result("gpu/large", "gpu-0", "s1", "8Gi"))
    [share] = shares(claim, DRIVER)
    assert share.qos == Qos("lc", "resnet50", target_ms=40.0, max_batch=4)
    assert share.base_request == "gpu"
    [prepared] = make_preparer(workdir).prepare(claim, [share])
    region = workdir / "regions" / "dra-uid-1-gpu"
    assert read_limits(region).memory_bytes == (8 * 1024 * MIB,)
    pod = parse_pod("c", json.loads((region / "pod.json").read_text()), "pod.json")
    assert (pod.kind, pod.target_ms) == ("lc", 40.0)
    [device] = spec_of(workdir)["devices"]
    assert CDI_NAME.match(device["name"]), device["name"]
    assert prepared.cdi_id == f"{DRIVER}/claim={device['name']}"


def test_a_request_for_two_devices_gets_one_region_and_cdi_device_for_all_its_gpus(
    workdir: Path,
) -> None:
    """Issue 32: three results of one request (GPU 0, and GPU 1 twice) are what one container
    gets: one region with a cap per GPU (GPU 1's two shares summed: 3 + 4 GiB, 40 %; the
    share paced is the smallest GPU's, 20 %), one CDI device that every result names, with
    both GPUs visible in CUDA's order and both device nodes."""
    claim = claim_with(
        result("gpu", "gpu-0", "s1", "2Gi"),
        result("gpu", "gpu-1", "s2", "3Gi"),
        result("gpu", "gpu-1", "s3", "4Gi"),
    )
    fake_dev(workdir / "dev", ("nvidia0", "nvidia1", "nvidiactl"))
    prepared = make_preparer(workdir, TWO_GPUS).prepare(claim, shares(claim, DRIVER))
    [region] = [p for p in (workdir / "regions").iterdir() if p.name != ".dra-staging"]
    assert region.name == "dra-uid-1-gpu"
    limits = read_limits(region)
    assert (limits.memory_bytes, limits.share_bp) == ((2048 * MIB, 7168 * MIB), 2000)
    body = json.loads((region / "pod.json").read_text())
    assert (body["gpu"], body["gpus"], body["memory_mib"]) == (0, [0, 1], 2048)
    assert parse_pod("c", body, "pod.json").gpus == (0, 1)
    [device] = spec_of(workdir)["devices"]
    assert device["name"] == "uid-1-gpu"
    assert {p.cdi_id for p in prepared} == {f"{DRIVER}/claim=uid-1-gpu"}
    edits = device["containerEdits"]
    env = dict(e.split("=", 1) for e in edits["env"])
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "GPU-fake-0,GPU-fake-1"
    assert [n["path"] for n in edits["deviceNodes"]] == [
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidiactl",
    ]
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    assert mounts[env["ARKGPU_REGION_DIR"]] == str(region)


def test_each_request_of_a_claim_gets_its_own_region_and_cdi_device(workdir: Path) -> None:
    """Two requests (``a`` on GPU 0, ``b/small`` on GPU 1): a container naming one request
    is given that request's devices only, so each request is a group of its own."""
    claim = claim_with(result("a", "gpu-0", "s1", "2Gi"), result("b/small", "gpu-1", "s2", "3Gi"))
    fake_dev(workdir / "dev", ("nvidia0", "nvidia1", "nvidiactl"))
    prepared = make_preparer(workdir, TWO_GPUS).prepare(claim, shares(claim, DRIVER))
    caps = {n: read_limits(workdir / "regions" / f"dra-uid-1-{n}").memory_bytes for n in "ab"}
    assert caps == {"a": (2048 * MIB,), "b": (3072 * MIB,)}
    devices = spec_of(workdir)["devices"]
    assert [d["name"] for d in devices] == ["uid-1-a", "uid-1-b"]
    assert [p.cdi_id for p in prepared] == [f"{DRIVER}/claim=uid-1-a", f"{DRIVER}/claim=uid-1-b"]
    env = [dict(e.split("=", 1) for e in d["containerEdits"]["env"]) for d in devices]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in env] == ["GPU-fake-0", "GPU-fake-1"]
    nodes = [[n["path"] for n in d["containerEdits"]["deviceNodes"]] for d in devices]
    assert nodes == [["/dev/nvidia0", "/dev/nvidiactl"], ["/dev/nvidia1", "/dev/nvidiactl"]]


@pytest.mark.parametrize(
    ("requests", "applies"),
    [([], True), (["gpu"], True), (["gpu/large"], True), (["gpu/small"], False), (["x"], False)],
)
def test_a_config_for_the_main_request_covers_its_subrequests(
    requests: list[str], applies: bool
) -> None:
    """Kubernetes' rule: ``main`` covers ``main/<any>``; ``main/sub`` covers that one only."""
    claim = claim_with(result("gpu/large", "gpu-0", "s1"))
    claim["status"]["allocation"]["devices"]["config"][0]["requests"] = requests
    [share] = shares(claim, DRIVER)
    assert (share.qos.kind == "lc") is applies


def test_device_nodes_use_the_minor_number_host_paths_and_only_existing_uvm_nodes(
    workdir: Path,
) -> None:
    """GPU index 0 whose node is /dev/nvidia3; nvidia-uvm is there, nvidia-uvm-tools not."""
    fake_dev(workdir / "dev", ("nvidia3", "nvidiactl", "nvidia-uvm"))
    gpus = {0: InventoryGpu(0, "GPU-fake-0", "fake", 16_384, minor=3)}
    claim = claim_with(result("gpu", "gpu-0", "s1"))
    make_preparer(workdir, gpus).prepare(claim, shares(claim, DRIVER))
    [device] = spec_of(workdir)["devices"]
    nodes = device["containerEdits"]["deviceNodes"]
    assert nodes == [
        {"path": p, "hostPath": p} for p in ("/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm")
    ]


def test_host_dev_dir_is_the_host_path_of_the_device_nodes(workdir: Path) -> None:
    """A node whose device nodes are not in /dev (``host_dev_dir``): the CDI spec names them
    there as hostPath, at /dev/<name> in the container."""
    fake_dev(workdir / "dev", ("nvidia0", "nvidiactl"))
    base = make_preparer(workdir)
    preparer = dataclasses.replace(base, host_dev_dir=Path("/opt/gpu/dev"))
    claim = claim_with(result("gpu", "gpu-0", "s1"))
    preparer.prepare(claim, shares(claim, DRIVER))
    [device] = spec_of(workdir)["devices"]
    assert device["containerEdits"]["deviceNodes"] == [
        {"path": f"/dev/{n}", "hostPath": f"/opt/gpu/dev/{n}"} for n in ("nvidia0", "nvidiactl")
    ]


@pytest.mark.parametrize("missing", ["nvidia3", "nvidiactl"])
def test_a_missing_gpu_or_control_node_fails_prepare_before_anything_is_written(
    workdir: Path, missing: str
) -> None:
    present = tuple(n for n in ("nvidia3", "nvidiactl") if n != missing)
    fake_dev(workdir / "dev", present)
    gpus = {0: InventoryGpu(0, "GPU-fake-0", "fake", 16_384, minor=3)}
    claim = claim_with(result("gpu", "gpu-0", "s1"))
    with pytest.raises(ClaimError, match=rf"^claim ns/infer: GPU 0: device node /dev/{missing} "):
        make_preparer(workdir, gpus).prepare(claim, shares(claim, DRIVER))
    assert not (workdir / "cdi").exists()
    assert [p.name for p in (workdir / "regions").iterdir()] == []


def test_the_kubelet_hears_the_main_request_of_a_subrequest_result(workdir: Path) -> None:
    """A container's ``resources.claims[].request`` names ``gpu``: the device must say so."""
    server, plugin = start(workdir, Claims(claim_with(result("gpu/large", "gpu-0", "s1"))))
    try:
        response = kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"]
        assert response.error == ""
        [device] = response.devices
        assert list(device.request_names) == ["gpu"]
        assert list(device.cdi_device_ids) == [f"{DRIVER}/claim=uid-1-gpu"]
    finally:
        server.stop(None)


def test_the_region_names_the_pods_the_claim_is_reserved_for(workdir: Path) -> None:
    """``pod_uids`` in pod.json: the backstop attributes processes by their pod's cgroup."""
    claim = claim_with(result("gpu", "gpu-0", "s1"))
    claim["status"]["reservedFor"] = [
        {"resource": "pods", "name": "infer-0", "uid": "pod-uid-1"},
        {"resource": "jobs", "name": "other", "uid": "job-uid"},
    ]
    make_preparer(workdir).prepare(claim, shares(claim, DRIVER))
    body = json.loads((workdir / "regions" / "dra-uid-1-gpu" / "pod.json").read_text())
    assert body["pod_uids"] == ["pod-uid-1"]


def test_the_limiter_comes_from_the_preload_file_mounted_at_etc_ld_so_preload(
    workdir: Path,
) -> None:
    """Issue 32 item 9 on the DRA path: no ``LD_PRELOAD`` in the CDI edits (the pod's own
    stays the pod's); the driver's preload file, naming the library, is mounted read-only
    at /etc/ld.so.preload beside the library itself."""
    preparer = make_preparer(workdir)
    claim = claim_with(result("gpu", "gpu-0", "s1"))
    preparer.prepare(claim, shares(claim, DRIVER))
    [device] = spec_of(workdir)["devices"]
    edits = device["containerEdits"]
    assert not [e for e in edits["env"] if e.startswith("LD_PRELOAD=")]
    mounts = {m["containerPath"]: m for m in edits["mounts"]}
    preload = mounts["/etc/ld.so.preload"]
    assert preload == {
        "hostPath": str(preparer.preload_file),
        "containerPath": "/etc/ld.so.preload",
        "options": ["bind", "ro"],
    }
    library = str(preparer.library_path)
    assert mounts[library]["options"] == ["bind", "ro"]
    assert preparer.preload_file.read_text() == f"{library}\n"
    assert preparer.preload_file.stat().st_mode & 0o777 == 0o644
