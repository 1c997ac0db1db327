"""``arkgpu webhook run``: the admission endpoints over HTTPS until SIGTERM.

Start-up: the predictor's known models (the file named by ``predictor``, else
the one fitted on the shipped profiles), the node watch unless
``limits.max_gpu_memory_mib`` is set, the HTTPS endpoint
(:class:`arkgpu.k8s.jsonhttp.JsonServer`: ``/mutate``, ``/validate``, ``/healthz``,
``/readyz`` — ready once the first node list is in — and ``/metrics``) and the
certificate reloader.
"""

from __future__ import annotations

import logging
import signal
import ssl
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from prometheus_client import CollectorRegistry

from arkgpu.k8s.jsonhttp import JsonServer, ServerConfig
from arkgpu.k8s.tls import CertificateReloader
from arkgpu.k8s.webhook.admitting import Admission
from arkgpu.k8s.webhook.config import WebhookConfig
from arkgpu.k8s.webhook.inventory import GpuMemoryIndex, NodeWatcher
from arkgpu.k8s.webhook.mutating import Mutation
from arkgpu.k8s.webhook.validating import Rules
from arkgpu.predictor import Predictor, default_predictor

METRICS_PREFIX = "arkgpu_webhook"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest AdmissionReview accepted, bytes (a pod is at most ~1.5 MiB in etcd; its review
carries the object twice on UPDATE)."""


def known_models(predictor: Path | None) -> frozenset[str]:
    """Every model the predictor can predict (ValueError naming the field ``predictor``)."""
    try:
        fitted = Predictor.load(predictor) if predictor else default_predictor()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"predictor: cannot load {predictor}: {exc}") from None
    return frozenset(m for gpu in fitted.gpus() for m in fitted.models(gpu))


@dataclass
class RunningWebhook:
    """The started pieces, closed in reverse order."""

    server: JsonServer
    port: int
    """The bound HTTPS port."""
    reloader: CertificateReloader
    watcher: NodeWatcher | None

    def close(self) -> None:
        """Stops serving, the reloader and the watch."""
        self.server.close()
        self.reloader.stop()
        if self.watcher is not None:
            self.watcher.stop()


def start_webhook(config: WebhookConfig, registry: CollectorRegistry) -> RunningWebhook:
    """Starts everything ``config`` asks for; returns once the port listens."""
    rules = Rules(known_models(config.predictor), config.limits.max_gpu_count)
    watcher = None
    fixed = config.limits.max_gpu_memory_mib
    if fixed is None:
        watcher = NodeWatcher.connect(config.kubeconfig, GpuMemoryIndex())
    admission = Admission(
        Mutation(config.scheduler_name, config.defaults),
        rules,
        (lambda: fixed) if watcher is None else watcher.largest,
        registry,
    )
    index = None if watcher is None else watcher.index
    server = JsonServer(
        ServerConfig(
            config.listen_address,
            config.port,
            config.tls_cert_file,
            config.tls_key_file,
            max_body_bytes=MAX_BODY_BYTES,
        ),
        admission.routes(),
        registry,
        METRICS_PREFIX,
        ready=lambda: index is None or index.listed,
    )
    reloader = CertificateReloader(
        config.tls_cert_file, config.tls_key_file, _installer(server), config.tls_reload_s
    )
    if watcher is not None:
        watcher.start()
    port = server.start()
    reloader.start()
    return RunningWebhook(server, port, reloader, watcher)


def _installer(server: JsonServer) -> Callable[[ssl.SSLContext], None]:
    def install(context: ssl.SSLContext) -> None:
        server.context = context  # read by each new connection

    return install


def serve(config: WebhookConfig) -> int:
    """Runs the webhook until SIGTERM or SIGINT; returns the exit status."""
    running = start_webhook(config, CollectorRegistry())  # bad settings raise before any set-up
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    memory = "from node inventories" if running.watcher else f"{config.limits.max_gpu_memory_mib}"
    print(
        f"arkgpu webhook: https://{config.listen_address}:{running.port} "
        f"(/mutate, /validate); scheduler {config.scheduler_name}; largest GPU memory {memory}",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not stopping.wait(1.0):
            pass
    finally:
        running.close()
    return 0
