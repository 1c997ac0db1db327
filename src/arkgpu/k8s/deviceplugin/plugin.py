"""The plugin's life: serve its socket, register with the kubelet, follow kubelet restarts.

Every ``kubelet_check_s`` the plugin compares ``kubelet.sock`` and its own
socket with those it registered with. A kubelet that restarts deletes every
socket in its directory and creates a new ``kubelet.sock``: the plugin then
serves a fresh socket and registers again, as NVIDIA's plugin does. Every
``inventory_period_s`` it asks NVML again for the GPUs; a change reaches the
kubelet through ListAndWatch and the cluster through the inventory annotation,
the regions of containers started without PreStartContainer are settled
(:mod:`arkgpu.k8s.deviceplugin.rebuilding`, also once at start), the regions no
container holds any more (per the kubelet's PodResources API) are removed; a second
plugin holding ``nvidia.com/gpu`` is warned about.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import replace
from pathlib import Path

import grpc

from arkgpu.k8s.contract import RESOURCE_GPU, InventoryGpu
from arkgpu.k8s.deviceplugin.allocating import region_key
from arkgpu.k8s.deviceplugin.apiserver import PodApi
from arkgpu.k8s.deviceplugin.config import SOCKET_NAME, DevicePluginConfig
from arkgpu.k8s.deviceplugin.containers import (
    folder_marks,
    remove_regions,
    stale_regions,
    unchanged,
    write_preload_file,
)
from arkgpu.k8s.deviceplugin.devices import SEPARATOR
from arkgpu.k8s.deviceplugin.podresources import DeviceHolders
from arkgpu.k8s.deviceplugin.rebuilding import rebuild_regions
from arkgpu.k8s.deviceplugin.service import DeviceBoard, DevicePluginService, options
from arkgpu.k8s.deviceplugin.wire import API_VERSION, add_device_plugin, pb, register, unix_target
from arkgpu.k8s.gpus import GpuSource
from arkgpu.k8s.inventory import InventoryPublisher

REGISTER_TIMEOUT_S = 10.0
"""How long a Register call may take before it is tried again at the next check."""
NO_NVML_HINT = (
    "the container needs the NVIDIA driver's libraries: the NVIDIA container toolkit as the "
    "default runtime or node.runtimeClassName, or privileged with the libraries mounted; "
    "docs/INSTALL.md"
)
"""What a node without NVML in the plugin's container lacks."""
WORKERS = 8
"""gRPC worker threads: one per open ListAndWatch stream, the rest for the other calls."""


def kubelet_up_s(socket: Path) -> float:
    """Seconds since the kubelet made its registration socket (0 when there is none)."""
    try:
        made = socket.stat().st_mtime
    except OSError:
        return 0.0
    return max(0.0, time.time() - made)


def identity(path: Path) -> tuple[int, int] | None:
    """Which file is at ``path`` (inode and change time), None when nothing is."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


class DevicePlugin:
    """One node's device plugin and inventory agent."""

    def __init__(
        self,
        config: DevicePluginConfig,
        gpus: GpuSource,
        pods: PodApi,
        holders: DeviceHolders,
        inventory: InventoryPublisher,
        log: Callable[[str], None],
    ) -> None:
        self.config, self.gpus, self.inventory, self.log = config, gpus, inventory, log
        self.board = DeviceBoard()
        self.holders = holders
        self.service = DevicePluginService(config, self.board, pods, holders, log)
        self.not_ready = ""
        """Why the plugin cannot serve yet (NVML does not start); empty once it has GPUs."""
        self.rescans = 0
        """Periodic scans done (each also collects regions and checks for another plugin)."""
        self.foreign_devices = 0
        """``nvidia.com/gpu`` devices the kubelet can allocate that are not this plugin's
        (another plugin, such as NVIDIA's, registered the resource)."""
        self.rebuilt = 0
        """Regions settled for containers started without PreStartContainer so far."""
        self._rebuild_notes: set[str] = set()
        self._server: grpc.Server | None = None
        self._own: tuple[int, int] | None = None
        self._kubelet: tuple[int, int] | None = None
        self.registrations = 0
        """Successful Register calls so far."""
        self.last_tick = time.monotonic()
        """When the loop last checked the kubelet (monotonic seconds): liveness."""

    def scan(self) -> tuple[InventoryGpu, ...]:
        """Ask NVML for the GPUs; update the devices and the inventory when they changed."""
        gpus = self.gpus.scan()
        if self.board.update(gpus):
            healthy = sum(g.healthy for g in gpus)
            self.log(f"{len(gpus)} GPU(s), {healthy} healthy: devices updated")
        try:
            if self.inventory.publish(gpus):
                self.log(f"inventory published on node {self.config.node_name}")
        except Exception as exc:  # the API server: tried again at the next scan
            self.log(
                f"inventory not published (retried in {self.config.inventory_period_s:g} s):"
                f" {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            )
        return gpus

    def _rescan(self) -> None:
        """A scan after the first: NVML failing as a whole makes every GPU unhealthy."""
        try:
            self.scan()
        except OSError as exc:
            self.log(f"every GPU marked unhealthy: {exc}")
            gpus = self.board.snapshot()[1]
            self.board.update(tuple(replace(g, healthy=False) for g in gpus))
        self.rebuild_regions()
        self.collect_regions()
        self.check_foreign()
        self.rescans += 1

    def rebuild_regions(self) -> None:
        """Settle the regions of containers the kubelet started without PreStartContainer
        (:mod:`arkgpu.k8s.deviceplugin.rebuilding`); a reason not to is logged when it is
        new (the kubelet not answering: tried again at the next scan)."""
        try:
            done = rebuild_regions(self.service, self.holders.holders(RESOURCE_GPU))
        except Exception as exc:  # the kubelet (restarting): tried again at the next scan
            notes = {f"regions not rebuilt (next scan): {type(exc).__name__}"}
        else:
            for line in done.settled:
                self.log(line)
            self.rebuilt += len(done.settled)
            notes = set(done.refused)
        for line in sorted(notes - self._rebuild_notes):
            self.log(line)
        self._rebuild_notes = notes

    def collect_regions(self) -> None:
        """Remove the regions no container holds any more, per the kubelet's PodResources
        (kept while the kubelet does not answer); see :func:`stale_regions`."""
        if not self.config.regions_dir.is_dir():
            return
        up_s = kubelet_up_s(self.config.kubelet_socket)
        listed = stale_regions(self.config.regions_dir, set(), self.config.region_grace_s, up_s)
        if not listed:
            return
        marks = folder_marks(listed)
        try:
            holders = self.holders.holders(RESOURCE_GPU)
        except Exception as exc:  # the kubelet: tried again at the next scan
            self.log(f"regions not collected: {type(exc).__name__}")
            return
        held = {region_key(h.devices) for h in holders}
        gone = [f for f in unchanged(marks) if f.name not in held]
        remove_regions(gone)
        for folder in gone:
            self.log(f"removed region {folder} (no container holds its devices)")

    def check_foreign(self) -> None:
        """Count the kubelet's ``nvidia.com/gpu`` devices that are not ours; warn on a change."""
        try:
            listed = self.holders.allocatable(RESOURCE_GPU)
        except Exception:  # the kubelet: asked again at the next scan
            return
        ours = {g.uuid for g in self.board.snapshot()[1]}
        foreign = sorted(
            d for d in listed if d.rsplit(SEPARATOR, 1)[0] not in ours or SEPARATOR not in d
        )
        if len(foreign) != self.foreign_devices and foreign:
            self.log(
                f"WARNING: the kubelet holds {len(foreign)} {RESOURCE_GPU} device(s) of another "
                f"device plugin (e.g. {foreign[0]}): pods given them run without the limiter; "
                "keep NVIDIA's plugin off this node (docs/k8s/DEVICE-PLUGIN.md)"
            )
        self.foreign_devices = len(foreign)

    def check_kubelet(self) -> None:
        """Serve a fresh socket if ours is gone; register if the kubelet is new."""
        if self._server is None or identity(self.config.socket_path) != self._own:
            self._serve()
        kubelet = identity(self.config.kubelet_socket)
        if kubelet is None or kubelet == self._kubelet:
            return
        request = pb.RegisterRequest(
            version=API_VERSION, endpoint=SOCKET_NAME, resource_name=RESOURCE_GPU, options=options()
        )
        try:
            register(self.config.kubelet_socket, request, REGISTER_TIMEOUT_S)
        except grpc.RpcError as exc:
            self.log(
                f"registration with the kubelet failed ({exc.code().name}: {exc.details()});"
                " trying again"
            )
            return
        self._kubelet = kubelet
        self.registrations += 1
        self.log(f"registered {RESOURCE_GPU} with the kubelet at {self.config.kubelet_socket}")

    def _serve(self) -> None:
        self._stop_server()
        socket = self.config.socket_path
        socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS))
        add_device_plugin(self.service, server)
        server.add_insecure_port(unix_target(socket))
        server.start()
        self._server, self._own, self._kubelet = server, identity(socket), None
        self.log(f"serving the device plugin API {API_VERSION} at {socket}")

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.stop(grace=0.5).wait()
            self._server = None

    def run(self, stop: threading.Event) -> None:
        """Scan, serve and register until ``stop`` is set; then close the socket."""
        next_scan = time.monotonic() + self.config.inventory_period_s
        try:
            write_preload_file(self.config)
            self._first_scan(stop)
            self.rebuild_regions()
            while not stop.is_set():
                if time.monotonic() >= next_scan:
                    self._rescan()
                    next_scan = time.monotonic() + self.config.inventory_period_s
                self.check_kubelet()
                self.last_tick = time.monotonic()
                stop.wait(self.config.kubelet_check_s)
        finally:
            self.close()

    def _first_scan(self, stop: threading.Event) -> None:
        """Scan until NVML answers, every ``inventory_period_s``: without the driver's libraries
        in the container (no NVIDIA container toolkit, no runtime class) the plugin stays up,
        unready with the reason on ``/readyz`` and in the log, instead of restarting in a loop;
        nothing is served or registered until it has GPUs."""
        while not stop.is_set():
            try:
                self.scan()
            except OSError as exc:
                reason = f"{exc} ({NO_NVML_HINT})"
                if reason != self.not_ready:
                    self.log(
                        f"not ready, retried every {self.config.inventory_period_s:g} s: {reason}"
                    )
                self.not_ready = reason
                self.last_tick = time.monotonic()
                stop.wait(self.config.inventory_period_s)
            else:
                self.not_ready = ""
                return

    @property
    def registered(self) -> bool:
        """Registered with the kubelet now serving ``kubelet.sock``."""
        return self._kubelet is not None and self._kubelet == identity(self.config.kubelet_socket)

    def close(self) -> None:
        """End the streams, stop serving and remove the socket (if still ours)."""
        self.board.stopped.set()
        self._stop_server()
        if self._own is not None and identity(self.config.socket_path) == self._own:
            self.config.socket_path.unlink(missing_ok=True)
