"""Settings of ``arkgpu dra-driver run``, loaded from a TOML file.

Every key of the file is a field of :class:`DraConfig`; an unknown key, a wrong
type or a value out of range stops the load with one line naming the file and
the field (exit status 2 from the CLI).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from arkgpu.k8s.dra.ordering import DEVICE_ORDERS
from arkgpu.model import settings
from arkgpu.model.settings import Parser, boolean, choice, integer, number, parsed, path, text

NODE_NAME_VARIABLE = "NODE_NAME"
"""Environment variable naming the node when ``node_name`` is not set (the Downward API)."""
DRIVER_NAME = "gpu.arkgpu.io"
"""Default DRA driver name: the ``driver`` of our ResourceSlices and of the DeviceClass's
selector (deploy/dra/deviceclass.yaml)."""
SOCKET_PATH_MAX = 107
"""Longest Unix socket path Linux accepts (``sun_path`` less its NUL)."""
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class DraConfig:
    """Settings of the DRA driver (units and defaults in each field's text)."""

    node_name: str = ""
    """Name of the Node whose GPUs are published (default: environment ``NODE_NAME``)."""
    kubeconfig: Path | None = None
    """kubeconfig file of the API server; default none: the pod's service account."""
    driver_name: str = DRIVER_NAME
    """DRA driver name, a DNS subdomain (default gpu.arkgpu.io); the DeviceClass selects it."""
    nvml: bool = True
    """Discover GPUs through NVML (default true); false: assume ``gpus`` GPUs of
    ``gpu_memory_mib`` each (tests, a node without the driver yet)."""
    gpus: int = 1
    """GPUs assumed when ``nvml`` is false (default 1)."""
    gpu_memory_mib: int = 16_384
    """Memory of each assumed GPU when ``nvml`` is false, MiB (default 16384)."""
    memory_step_mib: int = 256
    """Granularity of the ``memory`` capacity, MiB (default 256): the smallest request and
    the step requests are rounded up to (the limiter caps at any size; a step bounds the
    fragments kube-scheduler leaves)."""
    cores_step: int = 5
    """Granularity of the ``cores`` capacity, percent of the GPU's compute (default 5: the
    limiter's share control is coarser than 1 % under load)."""
    resync_s: float = 10.0
    """Seconds between two NVML scans that keep the slice current (default 10); with
    ``device_order = "pack"`` also how often the order follows the GPUs' loads."""
    device_order: str = "index"
    """Order of the GPUs in the slice, which kube-scheduler's allocator walks taking the
    first that fits: ``index`` (default, by NVML index) or ``pack`` (most-loaded GPU with
    room first, from the allocated claims; needs list on resourceclaims;
    arkgpu.k8s.dra.ordering)."""
    delete_on_exit: bool = True
    """Delete this node's slice on SIGTERM (default true: a stopped driver's GPUs cannot be
    prepared, so kube-scheduler should stop allocating them)."""
    kubelet_plugin: bool = True
    """Serve the kubelet plugin (registration, NodePrepare/NodeUnprepareResources); default
    true. False publishes the slice only."""
    listen_address: str = "0.0.0.0"
    """Address of the ``/healthz``, ``/readyz`` and ``/metrics`` endpoint (default 0.0.0.0:
    the kubelet's probes and Prometheus reach the pod's IP)."""
    port: int = 0
    """TCP port of that endpoint (default 0: no endpoint; the chart sets
    ``dra.metricsPort``, 9404). Off by default, unlike the device plugin's, because tests
    and dry runs start several drivers on one host."""
    registry_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    """The kubelet's plugin registration folder, where ``<driver_name>-reg.sock`` goes
    (default /var/lib/kubelet/plugins_registry, the kubelet's)."""
    plugin_dir: Path = Path("/var/lib/kubelet/plugins/gpu.arkgpu.io")
    """Folder of the plugin's own socket ``dra.sock`` (default
    /var/lib/kubelet/plugins/gpu.arkgpu.io)."""
    regions_dir: Path = Path("/run/arkgpu/regions")
    """Where Prepare creates one control region per claim request (default
    /run/arkgpu/regions, the node runtime's ``regions_dir``)."""
    cdi_dir: Path = Path("/var/run/cdi")
    """Where Prepare writes the claims' CDI specs (default /var/run/cdi, read by containerd
    and CRI-O)."""
    dev_dir: Path = Path("/dev")
    """The host's /dev as the driver sees it (default /dev; the chart mounts the host's at
    /host/dev): Prepare checks there that a GPU's device nodes exist before naming them in
    a CDI spec (written with their host paths under /dev)."""
    host_dev_dir: Path = Path("/dev")
    """Where the device nodes found under ``dev_dir`` are on the host (default /dev): the
    ``hostPath`` of each device node in the CDI specs. Only a node whose GPU device nodes
    live outside /dev (the real-node tests' fake GPU) sets it."""
    library_path: Path = Path("/usr/local/lib/arkgpu/libarkgpu_limiter.so")
    """Host path of the interception library, mounted read-only and preloaded (default
    /usr/local/lib/arkgpu/libarkgpu_limiter.so, as the device plugin's)."""
    preload_file: Path = Path("/run/arkgpu/ld.so.preload")
    """Host file the driver writes with ``library_path`` on one line and Prepare mounts
    read-only at ``/etc/ld.so.preload`` in each container, so ld.so loads the library
    whatever the pod's ``LD_PRELOAD`` (default /run/arkgpu/ld.so.preload, as the device
    plugin's; the chart puts it in ``node.preloadDir``)."""

    @property
    def registry_socket(self) -> Path:
        """The registration socket the kubelet's plugin watcher finds."""
        return self.registry_dir / f"{self.driver_name}-reg.sock"

    @property
    def dra_socket(self) -> Path:
        """The DRA service's socket (``PluginInfo.endpoint``)."""
        return self.plugin_dir / "dra.sock"


PARSERS: dict[str, Parser] = {
    "node_name": text,
    "kubeconfig": path,
    "driver_name": text,
    "nvml": boolean,
    "gpus": integer(1, 64),
    "gpu_memory_mib": integer(1),
    "memory_step_mib": integer(1),
    "cores_step": integer(1, 100),
    "resync_s": number(0.0, 3600.0),
    "device_order": choice(*DEVICE_ORDERS),
    "delete_on_exit": boolean,
    "kubelet_plugin": boolean,
    "listen_address": text,
    "port": integer(0, 65_535),
    "registry_dir": path,
    "plugin_dir": path,
    "regions_dir": path,
    "cdi_dir": path,
    "dev_dir": path,
    "host_dev_dir": path,
    "library_path": path,
    "preload_file": path,
}
"""How each field is read from TOML."""


def config_from_dict(
    table: dict[str, Any], source: str = "config", env: Mapping[str, str] | None = None
) -> DraConfig:
    """The configuration a parsed TOML table describes (ValueError naming the field).

    ``node_name`` falls back to ``env["NODE_NAME"]`` (default: the process's environment).
    """
    values = parsed(table, PARSERS, f"{source}: ")
    environ = os.environ if env is None else env
    values.setdefault("node_name", environ.get(NODE_NAME_VARIABLE, ""))
    config = DraConfig(**values)
    if not config.node_name:
        raise ValueError(
            f"{source}: field node_name: not set and ${NODE_NAME_VARIABLE} is empty "
            "(the Node whose GPUs to publish)"
        )
    if not _DNS_SUBDOMAIN.match(config.driver_name) or len(config.driver_name) > 63:
        raise ValueError(
            f"{source}: field driver_name: expected a DNS subdomain of at most 63 "
            f"characters, got {config.driver_name!r}"
        )
    if not config.nvml and config.memory_step_mib > config.gpu_memory_mib:
        raise ValueError(f"{source}: field memory_step_mib: larger than gpu_memory_mib")
    for name, socket in (
        ("registry_dir", config.registry_socket),
        ("plugin_dir", config.dra_socket),
    ):
        if config.kubelet_plugin and len(str(socket.absolute())) > SOCKET_PATH_MAX:
            raise ValueError(
                f"{source}: field {name}: socket path {socket} is longer than "
                f"{SOCKET_PATH_MAX} characters"
            )
    return config


def load_config(file: Path, env: Mapping[str, str] | None = None) -> DraConfig:
    """Read ``file`` (TOML); ValueError with one line naming the file and the field."""
    return settings.load_settings(file, lambda table, source: config_from_dict(table, source, env))


def field_names() -> list[str]:
    """Every field, in order (docs and tests)."""
    return [f.name for f in fields(DraConfig)]
