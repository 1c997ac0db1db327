"""List and watch: one resource of the API server followed into a sink, through any failure.

:class:`Reflector` lists the resource (the sink gets the full list), then
watches from the list's resourceVersion, passing each event on and keeping
the version of the last one (bookmarks included). When a watch ends (the API
server's timeout) it is reopened from that version; a 410 Gone (the version
is too old) lists again; any other error (the connection cut, the API server
restarting) waits and retries with the same version, the wait doubling from
``backoff_min_s`` to ``backoff_max_s`` and reset by a success. ``listed`` is
set once the first list is in the sink (the extender's readiness).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from arkgpu.k8s.cluster.api import GONE, ApiError, ClusterApi, Json

LOG = logging.getLogger(__name__)


class Sink(Protocol):
    """Where a reflector puts what it learns."""

    def replace(self, resource: str, items: list[Json]) -> None:
        """A full list of ``resource``."""
        ...

    def event(self, resource: str, kind: str, obj: Json) -> None:
        """One ADDED, MODIFIED or DELETED event."""
        ...


@dataclass(frozen=True)
class WatchConfig:
    """Timing of one reflector."""

    timeout_s: float = 300.0
    """Length of one watch before it is reopened, seconds (default 300)."""
    backoff_min_s: float = 0.2
    """First wait after an error, seconds (default 0.2)."""
    backoff_max_s: float = 30.0
    """Longest wait between retries, seconds (default 30)."""


class Reflector:
    """Follows one resource (``nodes`` or ``pods``) into a sink (see the module doc)."""

    def __init__(
        self,
        resource: str,
        api: ClusterApi,
        sink: Sink,
        config: WatchConfig,
        restarted: Callable[[], None] = lambda: None,
    ) -> None:
        self.resource, self.api, self.sink, self.config = resource, api, sink, config
        self.restarted = restarted
        self.listed = threading.Event()
        self.stopping = threading.Event()
        self.version: str | None = None
        self._wait = config.backoff_min_s

    def start(self) -> threading.Thread:
        """Runs :meth:`run` on a daemon thread."""
        thread = threading.Thread(target=self.run, name=f"watch-{self.resource}", daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        """Lists and watches until :attr:`stopping` is set."""
        while not self.stopping.is_set():
            try:
                self.step()
                self._wait = self.config.backoff_min_s
            except ApiError as exc:
                self._failed(exc, relist=exc.status == GONE)
            except Exception as exc:  # the connection cut, a broken stream: retry, never die
                self._failed(exc, relist=False)

    def step(self) -> None:
        """One list (when no version is held) and one watch until it ends."""
        if self.version is None:
            listed = self.api.list(self.resource)
            self.sink.replace(self.resource, listed.items)
            self.version = listed.resource_version
            self.listed.set()
        for event in self.api.watch(self.resource, self.version, self.config.timeout_s):
            if self.stopping.is_set():
                return
            if event.kind != "BOOKMARK":
                self.sink.event(self.resource, event.kind, event.obj)
            found = event.obj.get("metadata", {}).get("resourceVersion")
            if isinstance(found, str) and found:
                self.version = found

    def _failed(self, exc: Exception, relist: bool) -> None:
        self.restarted()
        if relist:
            LOG.info("watch of %s: %s; listing again", self.resource, exc)
            self.version = None
            return
        LOG.warning("watch of %s failed (%s); retrying in %.1f s", self.resource, exc, self._wait)
        self.stopping.wait(self._wait)
        self._wait = min(self._wait * 2, self.config.backoff_max_s)
