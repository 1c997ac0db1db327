"""What the plugin does on the node for one container: its region, and what the kubelet adds.

Regions are created with the limiter's own code (:mod:`arkgpu.limiter.region`)
under ``regions_dir``, one per set of allocated devices
(:func:`arkgpu.k8s.deviceplugin.allocating.region_key`): at Allocate with closed
limits, at PreStartContainer with the pod's (re-created there when missing: after
a reboot the kubelet starts containers from its checkpoint without an Allocate).
The container gets:

- environment: ``ARKGPU_REGION_DIR`` (its region's path inside the container),
  ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES`` (its GPUs' UUIDs);
  never ``LD_PRELOAD``: the pod's own value stays the pod's;
- mounts: the library (read-only), the ``preload_file`` at ``/etc/ld.so.preload``
  (read-only: ld.so loads the library first in every process, whatever the
  environment), the region folder (read-write: the library writes ``usage``) and
  over it the ``limits`` file (read-only);
- device nodes ``/dev/nvidia<minor>`` of its GPUs and the control nodes that
  exist on the node, or with ``device_list_strategy = "cdi"`` the CDI devices
  ``<cdi_kind>=<uuid>`` (the runtime's CDI spec brings nodes and libraries).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arkgpu.k8s import preload
from arkgpu.k8s.deviceplugin.allocating import REGION_PREFIX, closed_limits
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.wire import pb
from arkgpu.k8s.preload import PRELOAD_PATH
from arkgpu.limiter.region import LIMITS_FILE, USAGE_FILE, Limits, create_region, write_limits

CONTAINER_REGION = Path("/run/arkgpu/region")
"""Where a container sees its region."""
REGION_VARIABLE = "ARKGPU_REGION_DIR"
"""The interception library reads its region's path from this variable."""
POD_FILE = "pod.json"
"""The region's pod description, read by the node runtime (``arkgpu.node.pods``)."""
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
"""Device nodes a CUDA process uses besides its GPUs' (named only where they exist)."""


def open_region(regions_dir: Path, key: str, gpus: int) -> Path:
    """The region ``key``, (re)created with closed limits and no ``pod.json``.

    The kubelet calls Allocate at admission, before any container of the pod runs, and
    never again for a running container; so whatever a region of the same devices held
    (a pod that ended, the init container's Allocate) is from no running container, and
    the fresh files (and folder time) keep the collection from taking the region.
    """
    directory = regions_dir / key
    create_region(directory, closed_limits(gpus))
    (directory / POD_FILE).unlink(missing_ok=True)
    os.utime(directory)
    return directory


def settle_region(directory: Path, limits: Limits, description: Mapping[str, Any]) -> None:
    """Give the region its pod's limits and ``pod.json`` (created when missing).

    A container started while its region was missing (the kubelet skipped
    PreStartContainer) had its mount sources made by the runtime: empty folders named
    ``limits`` and ``usage`` are removed before the files are created.
    """
    for name in (LIMITS_FILE, USAGE_FILE):
        if (directory / name).is_dir():
            (directory / name).rmdir()  # only an empty one: OSError for anything else
    if (directory / LIMITS_FILE).is_file() and (directory / USAGE_FILE).is_file():
        write_limits(directory, limits)
    else:
        create_region(directory, limits)
    tmp = directory / f".{POD_FILE}.tmp"
    tmp.write_text(json.dumps(dict(description)), encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(directory / POD_FILE)


def write_preload_file(config: DevicePluginConfig) -> None:
    """Write ``preload_file``: the library's path on one line (:mod:`arkgpu.k8s.preload`)."""
    preload.write_preload_file(config.preload_file, config.library_path)


def device_nodes(config: DevicePluginConfig, minors: Sequence[int]) -> list[str]:
    """Host paths of the GPUs' nodes and the control nodes present under ``dev_root``."""
    names = [f"nvidia{m}" for m in minors] + list(CONTROL_DEVICES)
    return [f"/dev/{n}" for n in names if (config.dev_root / n).exists()]


def container_response(
    config: DevicePluginConfig, uuids: Sequence[str], minors: Sequence[int], region: Path
) -> pb.ContainerAllocateResponse:
    """Environment, mounts and devices of the container (the module's text)."""
    visible = ",".join(uuids)
    envs = {
        REGION_VARIABLE: str(CONTAINER_REGION),
        "CUDA_VISIBLE_DEVICES": visible,
        "NVIDIA_VISIBLE_DEVICES": visible,
    }
    library = config.library_path
    mounts = [
        pb.Mount(container_path=str(library), host_path=str(library), read_only=True),
        pb.Mount(
            container_path=str(PRELOAD_PATH), host_path=str(config.preload_file), read_only=True
        ),
        pb.Mount(container_path=str(CONTAINER_REGION), host_path=str(region), read_only=False),
        pb.Mount(
            container_path=str(CONTAINER_REGION / LIMITS_FILE),
            host_path=str(region / LIMITS_FILE),
            read_only=True,
        ),
    ]
    if config.device_list_strategy == "cdi":
        cdi = [pb.CDIDevice(name=f"{config.cdi_kind}={u}") for u in uuids]
        return pb.ContainerAllocateResponse(envs=envs, mounts=mounts, cdi_devices=cdi)
    nodes = device_nodes(config, minors)
    devices = [pb.DeviceSpec(container_path=n, host_path=n, permissions="rw") for n in nodes]
    return pb.ContainerAllocateResponse(envs=envs, mounts=mounts, devices=devices)


def stale_regions(
    regions_dir: Path, held: set[str], grace_s: float, kubelet_up_s: float = math.inf
) -> list[Path]:
    """The plugin's regions no container holds (``held``: the region keys of every
    container's devices, listed after the regions were).

    A settled region (with ``pod.json``: PreStartContainer ran, so the kubelet had recorded
    the allocation) is stale at once, but only once the kubelet has been up (``kubelet_up_s``)
    for ``grace_s``: a kubelet that has just started may list no pod yet. A region not
    settled (Allocate made it; the kubelet may not have recorded it yet) is stale once its
    folder is older than ``grace_s``.
    """
    now = time.time()
    found = []
    for folder in sorted(regions_dir.glob(f"{REGION_PREFIX}*/")):
        try:
            age = now - folder.stat().st_mtime
            settled = (folder / POD_FILE).is_file()
        except OSError:
            continue
        old_enough = kubelet_up_s > grace_s if settled else age > grace_s
        if folder.name not in held and old_enough:
            found.append(folder)
    return found


def folder_marks(folders: Sequence[Path]) -> dict[Path, tuple[int, int]]:
    """Each folder's inode and change time (ns) now, for :func:`unchanged` (a folder gone
    since it was listed is left out)."""
    marks = {}
    for folder in folders:
        try:
            st = folder.stat()
        except OSError:
            continue
        marks[folder] = (st.st_ino, st.st_mtime_ns)
    return marks


def unchanged(marks: Mapping[Path, tuple[int, int]]) -> list[Path]:
    """The folders of ``marks`` still as they were marked. A region that Allocate opened
    again for a new pod in the meantime (its ``pod.json`` removed, its folder touched:
    :func:`open_region`) has changed and is not stale whatever PodResources listed."""
    return [folder for folder, mark in marks.items() if folder_marks([folder]).get(folder) == mark]


def remove_regions(folders: Sequence[Path]) -> None:
    """Delete ``folders``."""
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
