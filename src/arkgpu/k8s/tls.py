"""Serving certificates that renew under a running server.

cert-manager (or the chart's own Secret, regenerated on upgrade) renews a
webhook's certificate by rewriting the mounted Secret; the kubelet swaps the
files under the pod (a symbolic-link switch). :class:`CertificateReloader`
polls the files' identity (inode, size, modification time, links followed) and,
when it changes, builds a new server context from them and hands it over:
connections accepted after that use the new certificate, those in flight keep
the old one. A pair that does not load (the key written before the certificate,
say) keeps the previous context and is tried again at the next poll.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from arkgpu.k8s.jsonhttp import tls_context

LOG = logging.getLogger(__name__)

Identity = tuple[tuple[int, int, int], ...]


def _identity(*files: Path) -> Identity | None:
    try:
        stats = [os.stat(f) for f in files]
    except OSError:
        return None
    return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)


class CertificateReloader:
    """Rebuilds the TLS context when the certificate or key files change."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        install: Callable[[ssl.SSLContext], None],
        period_s: float,
    ) -> None:
        self.cert_file, self.key_file, self.install = cert_file, key_file, install
        self.period_s = period_s
        self._seen = _identity(cert_file, key_file)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tls-reload", daemon=True)

    def check(self) -> bool:
        """Reloads when the files changed since the last load; True when it did."""
        now = _identity(self.cert_file, self.key_file)
        if now is None or now == self._seen:
            return False
        try:
            context = tls_context(self.cert_file, self.key_file)
        except ValueError as exc:
            LOG.warning("certificate changed but does not load yet: %s", exc)
            return False
        self.install(context)
        self._seen = now
        LOG.info("serving certificate reloaded from %s", self.cert_file)
        return True

    def start(self) -> None:
        """Polls every ``period_s`` on a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Ends the polling."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.check()
