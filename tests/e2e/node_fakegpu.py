"""The real node's fake GPU "driver", installed the way NVIDIA's container toolkit installs one.

A node with NVIDIA's toolkit in CDI mode has device nodes (``/dev/nvidia<N>``,
``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``), the driver's
user-space libraries, and a CDI spec of kind ``nvidia.com/gpu`` (what
``nvidia-ctk cdi generate`` writes) whose devices are named by index, by UUID and
``all``; each device's edits add its device node, the common edits add the
control nodes, the libraries and the environment. A container runtime with CDI
on (containerd 2.x) applies the spec to any container that names such a device.

Here the "driver" is the project's fake one (``src/arkgpu/limiter/native/fake``):

- device nodes made with ``mknod`` and NVIDIA's numbers (major 195: minor N for
  GPU N, 255 for ``nvidiactl``; ``nvidia-uvm`` has a dynamic major on a real
  host, :data:`UVM_MAJOR` here) in a test-owned folder, never in the host's /dev;
  the spec names them as host paths, so the containers see them at ``/dev/...``;
- ``libcuda.so.1`` and ``libnvidia-ml.so.1`` copied from the build and mounted
  read-only into the containers' ``/usr/lib/x86_64-linux-gnu``, where the dynamic
  loader of a Debian or Ubuntu based image finds them without a cache entry;
- the fake GPU's state: one file, mapped by every process that loads the fake
  driver (``FAKEGPU_STATE``; see ``fake/fakegpu_state.h``). Its folder is mounted
  read-write into every container of the node, so all containers of one GPU book
  kernels on one timeline and contend as they would on the real device.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.limiter import native

NVIDIA_MAJOR = 195
"""The NVIDIA driver's character-device major (``/dev/nvidia<N>``, ``/dev/nvidiactl``)."""
CTL_MINOR = 255
"""``/dev/nvidiactl``'s minor number."""
UVM_MAJOR = 235
"""``nvidia-uvm``'s major: dynamic on a real host (read from /proc/devices), fixed here."""
CDI_KIND = "nvidia.com/gpu"
"""The CDI kind NVIDIA's toolkit writes; device ids are ``nvidia.com/gpu=<name>``."""
CDI_VERSION = "0.6.0"
"""CDI spec version written (device nodes with host paths, mounts and env need no newer)."""
CONTAINER_LIB_DIR = "/usr/lib/x86_64-linux-gnu"
"""Where a container finds the driver libraries (the multiarch default search path)."""
CONTAINER_STATE_DIR = "/run/arkgpu-fakegpu"
"""Where a container sees the fake GPU's shared state folder."""
DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
"""The fake driver's libraries, as named in the build (``fake/``) and in the container."""


@dataclass(frozen=True)
class FakeGpuConfig:
    """The fake GPUs of the node."""

    root: Path
    """Test-owned folder for device nodes, libraries, state and the CDI spec (created)."""
    gpus: int = 2
    """GPUs on the node (``FAKEGPU_DEVICES``; the fake driver supports up to 8)."""
    memory_mib: int = 16384
    """Memory of each GPU (``FAKEGPU_MEM_MIB``)."""


@dataclass(frozen=True)
class FakeGpuNode:
    """What :func:`install` made, for the runtime's config and the tests."""

    config: FakeGpuConfig
    cdi_dir: Path
    """Folder of the CDI spec: give it to containerd's ``cdi_spec_dirs``."""
    dev_dir: Path
    lib_dir: Path
    state_dir: Path

    @property
    def env(self) -> dict[str, str]:
        """The fake driver's environment inside a container."""
        return {
            "FAKEGPU_STATE": f"{CONTAINER_STATE_DIR}/state",
            "FAKEGPU_DEVICES": str(self.config.gpus),
            "FAKEGPU_MEM_MIB": str(self.config.memory_mib),
        }

    def uuid(self, index: int) -> str:
        """GPU ``index``'s UUID as the fake NVML reports it."""
        return f"GPU-fake-{index}"

    def cdi_id(self, name: str) -> str:
        """The fully qualified CDI device id of device ``name`` (an index, a UUID or ``all``)."""
        return f"{CDI_KIND}={name}"


def _mknod(path: Path, major: int, minor: int) -> None:
    path.unlink(missing_ok=True)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    path.chmod(0o666)


def _node_edit(path: Path, name: str) -> dict[str, Any]:
    return {"path": f"/dev/{name}", "hostPath": str(path), "permissions": "rw"}


def cdi_spec(node: FakeGpuNode) -> dict[str, Any]:
    """The spec NVIDIA's toolkit would write for these GPUs (kind ``nvidia.com/gpu``)."""
    gpu_nodes = [
        _node_edit(node.dev_dir / f"nvidia{i}", f"nvidia{i}") for i in range(node.config.gpus)
    ]
    devices = []
    for i, edit in enumerate(gpu_nodes):
        for name in (str(i), node.uuid(i)):
            devices.append({"name": name, "containerEdits": {"deviceNodes": [edit]}})
    devices.append({"name": "all", "containerEdits": {"deviceNodes": gpu_nodes}})
    control = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
    mounts = [
        {
            "hostPath": str(node.lib_dir / lib),
            "containerPath": f"{CONTAINER_LIB_DIR}/{lib}",
            "options": ["ro", "nosuid", "nodev", "bind"],
        }
        for lib in DRIVER_LIBS
    ]
    mounts.append(
        {
            "hostPath": str(node.state_dir),
            "containerPath": CONTAINER_STATE_DIR,
            "options": ["rw", "nosuid", "nodev", "bind"],
        }
    )
    common = {
        "deviceNodes": [_node_edit(node.dev_dir / n, n) for n in control],
        "mounts": mounts,
        "env": [f"{k}={v}" for k, v in node.env.items()],
    }
    return {
        "cdiVersion": CDI_VERSION,
        "kind": CDI_KIND,
        "devices": devices,
        "containerEdits": common,
    }


def install(config: FakeGpuConfig) -> FakeGpuNode:
    """Device nodes, libraries, the shared state folder and the CDI spec under ``config.root``."""
    node = FakeGpuNode(
        config=config,
        cdi_dir=config.root / "cdi",
        dev_dir=config.root / "dev",
        lib_dir=config.root / "lib",
        state_dir=config.root / "state",
    )
    for folder in (node.cdi_dir, node.dev_dir, node.lib_dir, node.state_dir):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
    node.state_dir.chmod(0o777)  # containers of any user map the state file read-write
    for i in range(config.gpus):
        _mknod(node.dev_dir / f"nvidia{i}", NVIDIA_MAJOR, i)
    _mknod(node.dev_dir / "nvidiactl", NVIDIA_MAJOR, CTL_MINOR)
    _mknod(node.dev_dir / "nvidia-uvm", UVM_MAJOR, 0)
    _mknod(node.dev_dir / "nvidia-uvm-tools", UVM_MAJOR, 1)
    for lib in DRIVER_LIBS:
        target = node.lib_dir / lib
        shutil.copyfile(native.fake_driver_dir() / lib, target)
        target.chmod(0o755)
    spec = node.cdi_dir / "nvidia.json"
    tmp = spec.with_suffix(".tmp")
    tmp.write_text(json.dumps(cdi_spec(node), indent=2), encoding="utf-8")
    tmp.replace(spec)
    return node
