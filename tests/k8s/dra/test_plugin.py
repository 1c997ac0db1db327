"""The kubelet plugin over real Unix sockets: registration, Prepare, Unprepare.

An emulated kubelet (``kubelet.py``, from the same vendored protos) registers the
plugin and prepares an allocated claim; a workload process on the fake driver,
given the CDI spec's environment and mounts, sees exactly the claim's memory cap,
and is paced to its compute share; the node runtime reads the region's pod.json.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import grpc

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.plugin import DraService, PodSource, serve_plugin
from arkgpu.k8s.dra.preparing import STAGING, Preparer
from arkgpu.limiter import native, read_limits
from arkgpu.limiter.benchmarking import finish_load, start_load
from arkgpu.limiter.containers import FakeContainer, container_user, make_world_readable
from arkgpu.node.pods import parse_pod

from . import kubelet

DRIVER = "gpu.arkgpu.io"
MIB = 1 << 20


def allocated_claim(uid: str = "uid-1", memory: str = "6Gi", cores: str = "30") -> dict[str, Any]:
    """A claim as kube-scheduler leaves it (shape of the e2e test's claims), LC config."""
    params = {
        "apiVersion": "dra.arkgpu.io/v1alpha1",
        "kind": "GpuShareConfig",
        "qos": "lc",
        "model": "resnet50",
        "maxBatch": 4,
        "latencyTargetMs": 40,
    }
    config = {
        "source": "FromClaim",
        "requests": ["gpu"],
        "opaque": {"driver": DRIVER, "parameters": params},
    }
    result = {
        "request": "gpu",
        "driver": DRIVER,
        "pool": "node-1",
        "device": "gpu-0",
        "shareID": "share-abc",
        "consumedCapacity": {"memory": memory, "cores": cores},
    }
    return {
        "metadata": {"namespace": "ns", "name": "infer", "uid": uid},
        "status": {"allocation": {"devices": {"results": [result], "config": [config]}}},
    }


class Claims:
    """An in-memory claim (or pod) source: objects of namespace ``ns`` by name."""

    def __init__(self, *claims: dict[str, Any]) -> None:
        self.claims = {c["metadata"]["name"]: c for c in claims}

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.claims.get(name)
        return copy.deepcopy(found) if found and namespace == "ns" else None


def fake_dev(directory: Path, names: tuple[str, ...] = ("nvidia0", "nvidiactl")) -> Path:
    """A /dev of fake device nodes (plain files: Prepare only checks they exist)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).touch()
    return directory


def make_preparer(workdir: Path, gpus: dict[int, InventoryGpu] | None = None) -> Preparer:
    regions = workdir / "regions"
    make_world_readable(regions)
    dev = workdir / "dev"
    if not dev.exists():
        fake_dev(dev)
    known = gpus or {0: InventoryGpu(0, "GPU-fake-0", "fake", 16_384)}
    preload = workdir / "preload" / "ld.so.preload"
    library = native.limiter_library()
    return Preparer(regions, workdir / "cdi", DRIVER, library, known, dev, preload)


def start(
    workdir: Path, claims: Claims, pods: PodSource | None = None, preparer: Preparer | None = None
) -> tuple[grpc.Server, kubelet.RegisteredPlugin]:
    preparer = preparer or make_preparer(workdir)
    preparer.recover()
    service = DraService(claims, preparer, DRIVER, pods or Claims())
    server, _ = serve_plugin(
        workdir / "registry" / f"{DRIVER}-reg.sock", workdir / "plugin" / "dra.sock", service
    )
    return server, kubelet.register(workdir / "registry")


def container_of(spec: dict[str, Any], workdir: Path) -> tuple[FakeContainer, dict[str, str]]:
    """The container the CDI device describes: its region (the mount) and its environment."""
    [device] = spec["devices"]
    edits = device["containerEdits"]
    env = dict(item.split("=", 1) for item in edits["env"])
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    region = Path(mounts[env["ARKGPU_REGION_DIR"]])
    assert "LD_PRELOAD" not in env
    assert Path(mounts["/etc/ld.so.preload"]).read_text() == f"{native.limiter_library()}\n"
    extra = env | {"ARKGPU_REGION_DIR": str(region)}
    fake = workdir / "fakegpu"
    if not fake.exists():
        fake.touch()
        fake.chmod(0o666)
    return FakeContainer(region, fake, container_user()), extra


def test_registered_plugin_prepares_a_region_with_exactly_the_claims_cap_and_share(
    workdir: Path, staged_native: Path
) -> None:
    """6 GiB and 30 %: the workload sees 6 GiB, is refused above it, runs near 30 %."""
    server, plugin = start(workdir, Claims(allocated_claim()))
    try:
        assert plugin.name == DRIVER
        response = kubelet.prepare(plugin, [("ns", "infer", "uid-1")])
        result = response.claims["uid-1"]
        assert result.error == ""
        [device] = result.devices
        assert (device.pool_name, device.device_name, device.share_id) == (
            "node-1",
            "gpu-0",
            "share-abc",
        )
        assert list(device.request_names) == ["gpu"]
        assert list(device.cdi_device_ids) == [f"{DRIVER}/claim=uid-1-gpu"]
        spec = json.loads((workdir / "cdi" / "arkgpu-dra-uid-1.json").read_text())
        assert spec["kind"] == f"{DRIVER}/claim"
        box, env = container_of(spec, workdir)
        assert env["CUDA_VISIBLE_DEVICES"] == "GPU-fake-0"
        assert read_limits(box.region).share_bp == 3_000
        probe = box.popen([str(native.cubench()), "script"], env)
        out, _ = probe.communicate(
            f"devtotal\nalloc alloc {6 * 1024 * MIB - MIB}\nalloc alloc {2 * MIB}\nquit\n",
            timeout=60,
        )
        lines = out.splitlines()
        assert lines[0] == str(6 * 1024 * MIB)
        assert lines[1].startswith("ok")
        assert lines[2] == "oom"
        load = finish_load(
            start_load(FakeContainer(box.region, box.fake_state, box.user), 0.6, 1000)
        )
        assert 0.15 < load.share < 0.45
        pod = parse_pod("c", json.loads((box.region / "pod.json").read_text()), "pod.json")
        assert (pod.kind, pod.gpu, pod.model, pod.memory_mib) == ("lc", 0, "resnet50", 6144)
        assert (pod.target_ms, pod.max_batch) == (40.0, 4)

        assert kubelet.unprepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"].error == ""
        assert not box.region.exists()
        assert list((workdir / "cdi").iterdir()) == []
        again = kubelet.unprepare(plugin, [("ns", "infer", "uid-1")])
        assert again.claims["uid-1"].error == ""
    finally:
        server.stop(None)


def test_prepare_is_idempotent_and_refuses_a_claim_it_cannot_serve(workdir: Path) -> None:
    """A second Prepare reuses the region; a wrong UID or a missing claim is an error."""
    server, plugin = start(workdir, Claims(allocated_claim()))
    try:
        first = kubelet.prepare(plugin, [("ns", "infer", "uid-1")])
        region = workdir / "regions" / "dra-uid-1-gpu"
        inode = (region / "usage").stat().st_ino
        second = kubelet.prepare(plugin, [("ns", "infer", "uid-1")])
        assert second == first
        assert (region / "usage").stat().st_ino == inode
        assert [p.name for p in (workdir / "regions").iterdir() if p.name != STAGING] == [
            region.name
        ]
        refused = kubelet.prepare(plugin, [("ns", "infer", "uid-other"), ("ns", "gone", "u9")])
        assert "has UID uid-1" in refused.claims["uid-other"].error
        assert "not found" in refused.claims["u9"].error
    finally:
        server.stop(None)


KILLED_MID_PREPARE = """
import os, signal, sys
from pathlib import Path
from arkgpu.k8s.dra import preparing
from arkgpu.k8s.dra.claims import shares
original = preparing.create_region
def create_then_die(directory, limits, *args):
    original(directory, limits, *args)
    os.kill(os.getpid(), signal.SIGKILL)  # the plugin dies with a region half-built
preparing.create_region = create_then_die
sys.path.insert(0, sys.argv[2])
from k8s.dra.test_plugin import allocated_claim, make_preparer
claim = allocated_claim()
make_preparer(Path(sys.argv[1])).prepare(claim, shares(claim, "gpu.arkgpu.io"))
"""


def test_a_plugin_killed_mid_prepare_leaks_nothing_and_prepares_once(workdir: Path) -> None:
    """SIGKILL after the region is built, before it is in place: the restarted plugin
    removes the half-built one and the kubelet's retry prepares exactly one region."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    done = subprocess.run(
        [sys.executable, "-c", KILLED_MID_PREPARE, str(workdir), str(Path(__file__).parents[2])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    staged = workdir / "regions" / STAGING
    assert [p.name for p in staged.iterdir()] == ["dra-uid-1-gpu"]
    assert not (workdir / "regions" / "dra-uid-1-gpu").exists()
    server, plugin = start(workdir, Claims(allocated_claim()))  # the restart
    try:
        assert list(staged.iterdir()) == []
        result = kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"]
        assert result.error == ""
        regions = [p.name for p in (workdir / "regions").iterdir() if p.name != STAGING]
        assert regions == ["dra-uid-1-gpu"]
        assert read_limits(workdir / "regions" / "dra-uid-1-gpu").memory_bytes[0] == 6 * 1024 * MIB
        assert [p.name for p in (workdir / "cdi").iterdir()] == ["arkgpu-dra-uid-1.json"]
    finally:
        server.stop(None)
