"""``arkgpu dra-driver run``: publish the node's slice, serve the kubelet plugin, until SIGTERM.

At start: the GPUs are discovered, half-built regions of a plugin killed mid-Prepare
are removed (:meth:`Preparer.recover`), the kubelet plugin starts (when
``kubelet_plugin``), and the slice is published. Every ``resync_s`` the GPUs are
scanned again and the slice updated when they changed. On SIGTERM the plugin stops
and the slice is deleted (``delete_on_exit``; when the API server refuses, as after
``helm uninstall`` removed the driver's RBAC first, one line says so and the kubelet
deletes the slice once the plugin is gone for its wiping delay, 30 s); prepared regions
stay for the pods that use them.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from arkgpu.k8s.cluster.watching import Reflector, WatchConfig
from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.config import DraConfig
from arkgpu.k8s.dra.health import DriverState
from arkgpu.k8s.dra.ordering import ClaimLoads, ordered
from arkgpu.k8s.dra.publishing import KubernetesSlices, Publisher, SliceRefusedError
from arkgpu.k8s.dra.slices import devices, mig_message
from arkgpu.k8s.gpus import AssumedGpus, GpuSource, NvmlGpus


def gpu_source(config: DraConfig) -> GpuSource:
    """NVML, or the assumed GPUs (config ``nvml = false``)."""
    return NvmlGpus() if config.nvml else AssumedGpus(config.gpus, config.gpu_memory_mib)


def _say(text: str) -> None:
    print(f"arkgpu dra-driver: {text}", file=sys.stderr, flush=True)


def start_plugin(
    config: DraConfig, client: Any, found: Sequence[InventoryGpu], state: DriverState
) -> Any:
    """Recover, then serve the kubelet plugin (its services recorded in ``state`` for the
    probes); returns the gRPC server."""
    from arkgpu.k8s.dra.plugin import (  # noqa: PLC0415
        DraService,
        KubernetesClaims,
        KubernetesPods,
        serve_plugin,
    )
    from arkgpu.k8s.dra.preparing import Preparer  # noqa: PLC0415 (grpc only when served)

    gpus = {g.index: g for g in found}
    preparer = Preparer(
        config.regions_dir,
        config.cdi_dir,
        config.driver_name,
        config.library_path,
        gpus,
        config.dev_dir,
        config.preload_file,
        config.host_dev_dir,
    )
    for left in preparer.recover():
        _say(f"removed {left}, left half-built by an earlier run")
    claims, pods = KubernetesClaims(client), KubernetesPods(client)
    state.service = DraService(claims, preparer, config.driver_name, pods)
    server, state.registration = serve_plugin(
        config.registry_socket, config.dra_socket, state.service
    )
    _say(f"kubelet plugin on {config.dra_socket}, registration on {config.registry_socket}")
    return server


def start_probes(config: DraConfig, state: DriverState) -> Any:
    """Serve /healthz, /readyz and /metrics on ``listen_address:port``; None when port is 0."""
    if not config.port:
        return None
    from arkgpu.k8s.dra.health import probes  # noqa: PLC0415 (grpc, prometheus-client)
    from arkgpu.probes import serve_probes  # noqa: PLC0415

    server = serve_probes(probes(state), config.listen_address, config.port)
    _say(f"/healthz, /readyz and /metrics on {config.listen_address}:{config.port}")
    return server


def slice_devices(
    config: DraConfig, found: Sequence[InventoryGpu], claims: ClaimLoads | None
) -> list[dict[str, Any]]:
    """The slice's devices in ``device_order`` (the loads ``claims`` knows, for pack)."""
    listed = devices(found, config.memory_step_mib, config.cores_step)
    loads = {} if claims is None else claims.loads()
    return ordered(listed, loads, config.device_order)


def watch_claims(config: DraConfig, client: Any) -> tuple[ClaimLoads, Reflector]:
    """Pack order: this node's device loads, kept by a reflector over every ResourceClaim
    (listed once, then watched); waits up to one resync for the first list."""
    from arkgpu.k8s.cluster.kube import KubeApi  # noqa: PLC0415 (the k8s extra)

    claims = ClaimLoads(config.driver_name, config.node_name)
    timing = WatchConfig(backoff_max_s=max(config.resync_s, 1.0))
    reflector = Reflector("resourceclaims", KubeApi(client), claims, timing)
    reflector.start()
    reflector.listed.wait(config.resync_s)
    return claims, reflector


def serve(config: DraConfig) -> int:
    """Run until SIGTERM or SIGINT; 0 on a clean stop."""
    from arkgpu.k8s.cluster.kube import load_client  # noqa: PLC0415 (the k8s extra)
    from arkgpu.probes import stop_probes  # noqa: PLC0415

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    client = load_client(config.kubeconfig)
    publisher = Publisher(KubernetesSlices(client), config.node_name, config.driver_name)
    source = gpu_source(config)
    state = DriverState(config)
    found = source.scan()
    server = start_plugin(config, client, found, state) if config.kubelet_plugin else None
    probing = start_probes(config, state)
    claims, reflector = (
        watch_claims(config, client) if config.device_order == "pack" else (None, None)
    )
    try:
        _resync(config, source, publisher, claims, state, found, stop)
    finally:
        stop_probes(probing)
        if reflector is not None:
            reflector.stopping.set()
        if server is not None:
            server.stop(5).wait()
    if config.delete_on_exit:
        withdraw(publisher)
    return 0


def withdraw(publisher: Publisher) -> None:
    """Delete the slice at exit; a refusal is one line, not an error (the driver is
    stopping, and the kubelet deletes the slices of a plugin gone for 30 s)."""
    try:
        publisher.withdraw()
    except SliceRefusedError as exc:
        _say(f"could not delete {publisher.name} ({exc}); the kubelet deletes it 30 s after")
        return
    _say(f"deleted {publisher.name}")


def _resync(
    config: DraConfig,
    source: GpuSource,
    publisher: Publisher,
    claims: ClaimLoads | None,
    state: DriverState,
    found: Sequence[InventoryGpu],
    stop: threading.Event,
) -> None:
    """Publish ``found``, then rescan and publish every ``resync_s`` until ``stop``."""
    line, mig = mig_message(found, frozenset())
    if line:
        _say(line)
    listed = slice_devices(config, found, claims)
    state.published(first := publisher.reconcile(listed), len(listed))
    _say(f"{first} {publisher.name} ({len(found)} GPUs, {config.device_order} order)")
    while not stop.wait(config.resync_s):
        try:
            found = source.scan()
            line, mig = mig_message(found, mig)
            listed = slice_devices(config, found, claims)
            outcome = publisher.reconcile(listed)
        except Exception as exc:  # the API server or NVML may be away a while
            state.failed()
            _say(f"resync failed, retrying in {config.resync_s:g} s: {exc}")
            continue
        state.published(outcome, len(listed))
        if line:
            _say(line)
        if outcome != "unchanged":
            _say(f"{outcome} {publisher.name}")
