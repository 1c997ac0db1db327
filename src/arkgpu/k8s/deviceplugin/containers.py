"""What Allocate does for one container: its region on the node, and what the kubelet adds.

The region is created with the limiter's own code
(:func:`arkgpu.limiter.region.create_region`) under ``regions_dir``, with
``pod.json`` beside ``limits`` and ``usage``, so the node runtime adopts it.
The container gets:

- environment: ``ARKGPU_REGION_DIR`` (its region's path inside the container),
  ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES`` (the assigned GPUs'
  UUIDs, comma-separated), ``LD_PRELOAD`` (the interception library);
- mounts: the library (read-only), the region folder (read-write: the
  library writes ``usage``) and over it the ``limits`` file (read-only);
- device nodes: ``/dev/nvidia<index>`` of each assigned GPU, ``/dev/nvidiactl``,
  ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``.

A region's ``pod.json`` names its pod's UID; once no pod on the node has it
(the pod was deleted), the region is removed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from arkgpu.k8s.deviceplugin.allocating import (
    OWNER_KEY,
    Pending,
    cores_asked,
    limits_of,
    pod_description,
    region_name,
)
from arkgpu.k8s.deviceplugin.wire import pb
from arkgpu.limiter.region import LIMITS_FILE, create_region

CONTAINER_REGION = Path("/run/arkgpu/region")
"""Where a container sees its region."""
REGION_VARIABLE = "ARKGPU_REGION_DIR"
"""The interception library reads its region's path from this variable."""
POD_FILE = "pod.json"
"""The region's pod description, read by the node runtime (``arkgpu.node.pods``)."""
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
"""Device nodes every CUDA process needs besides its GPUs'."""


def create_container_region(pending: Pending, regions_dir: Path) -> Path:
    """Create (or re-create: a retried Allocate) the container's region; return its folder."""
    directory = regions_dir / region_name(pending)
    create_region(directory, limits_of(pending.assignment, cores_asked(pending)))
    tmp = directory / f".{POD_FILE}.tmp"
    tmp.write_text(json.dumps(pod_description(pending)), encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(directory / POD_FILE)
    return directory


def container_response(
    pending: Pending, region: Path, library: Path
) -> pb.ContainerAllocateResponse:
    """Environment, mounts and device nodes of the container (the module's text)."""
    uuids = ",".join(pending.uuids)
    envs = {
        REGION_VARIABLE: str(CONTAINER_REGION),
        "CUDA_VISIBLE_DEVICES": uuids,
        "NVIDIA_VISIBLE_DEVICES": uuids,
        "LD_PRELOAD": str(library),
    }
    mounts = [
        pb.Mount(container_path=str(library), host_path=str(library), read_only=True),
        pb.Mount(container_path=str(CONTAINER_REGION), host_path=str(region), read_only=False),
        pb.Mount(
            container_path=str(CONTAINER_REGION / LIMITS_FILE),
            host_path=str(region / LIMITS_FILE),
            read_only=True,
        ),
    ]
    nodes = [f"/dev/nvidia{g.index}" for g in pending.assignment.gpus] + list(CONTROL_DEVICES)
    devices = [pb.DeviceSpec(container_path=n, host_path=n, permissions="rw") for n in nodes]
    return pb.ContainerAllocateResponse(envs=envs, mounts=mounts, devices=devices)


def allocated_regions(regions_dir: Path) -> dict[Path, str]:
    """Regions this plugin created (their ``pod.json`` names a pod UID) -> that UID."""
    found = {}
    for folder in sorted(regions_dir.glob("*/")):
        try:
            body = json.loads((folder / POD_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        owner = body.get(OWNER_KEY) if isinstance(body, dict) else None
        if isinstance(owner, str) and owner:
            found[folder] = owner
    return found


def remove_orphans(regions: dict[Path, str], live_uids: set[str]) -> list[Path]:
    """Delete the regions in ``regions`` whose pod is not in ``live_uids``; those deleted.

    ``regions`` must be listed before the pods were: a region created since is not in it.
    """
    gone = [folder for folder, uid in regions.items() if uid not in live_uids]
    for folder in gone:
        shutil.rmtree(folder, ignore_errors=True)
    return gone
