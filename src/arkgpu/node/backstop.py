"""The escape backstop: NVML's per-process memory against each container's cap.

A process that escapes the interception library (statically linked, or calling
the driver by ioctl) allocates memory the library never counts. NVML reports
every process's real device memory; when a container's processes together hold
more than its cap plus ``backstop_margin_mib``, the runtime acts as configured:

* ``report``: one line on standard error, counted in ``escapes``;
* ``kill``: SIGTERM to the container's processes NVML lists, SIGKILL to those
  still alive ``backstop_grace_s`` later;
* ``evict``: writes ``<region>/evict`` (the reason) for the node's device
  plugin to evict the pod.

Fail closed (``unattached``): where the library cannot load (an image whose glibc
is too old for it, a cleared ``LD_PRELOAD``) a container's programs would run
with no cap and no share, within their memory. So a container whose GPU processes,
as NVML lists them, outnumber the processes its usage file shows attached, at two
checks in a row, gets the same action once (until it is attached again), with a
line saying so, counted in ``unattached_caught``. Slots of processes that died
without the library freeing them count as attached until reclaimed (the check
then errs on the lenient side).

Which container a process belongs to (NVML gives host pids; a container's own
pids, as its usage file holds them, are neither host pids nor trusted):
:mod:`arkgpu.node.attributing`, by the pod UID its cgroup names (the one way that
needs no CAP_SYS_PTRACE, so it sees other users' processes), by the identity of
the container's usage file that the process maps, or names in
``ARKGPU_REGION_DIR`` inside its own root, or by the mount namespace of a process
so attributed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from arkgpu.limiter.region import read_usage
from arkgpu.node.attributing import Attribution, pod_owners, usage_identity
from arkgpu.node.gpus import nvml_handles
from arkgpu.node.observing import Container

MIB = 1 << 20
"""Bytes in a MiB."""
ACTIONS = ("off", "report", "kill", "evict")
"""What the backstop may do."""
EVICT_FILE = "evict"
"""Marker written into a region by the ``evict`` action."""


@dataclass
class Backstop:
    """Checks NVML's per-process memory against the caps (call :meth:`check`)."""

    action: str
    """One of :data:`ACTIONS`."""
    margin_mib: int
    """How far over its cap a container may go before the action, MiB."""
    grace_s: float
    """Time between SIGTERM and SIGKILL (``kill``), s."""
    handles: dict[int, Any]
    """NVML device handle per GPU index."""
    escapes: int = 0
    """Containers caught over their cap."""
    pending: dict[int, float] = field(default_factory=dict)
    """pid -> CLOCK_MONOTONIC when it gets SIGKILL (``kill``)."""
    attribution: Attribution = field(default_factory=Attribution)
    """Host pid -> container (keeps the mount namespaces it learned)."""
    unattached: bool = True
    """Act on containers with GPU processes the library does not know (fail closed)."""
    unattached_caught: int = 0
    """Times a container was caught so."""
    suspects: set[str] = field(default_factory=set)
    """Containers with unattached GPU processes at the last check."""
    flagged: set[str] = field(default_factory=set)
    """Containers acted on for it (not again while it lasts)."""

    def check(self, containers: list[Container]) -> list[str]:
        """One pass over every GPU; returns the names of the containers caught."""
        self._finish_kills()
        caught: list[str] = []
        suspects: set[str] = set()
        for gpu, handle in self.handles.items():
            mine = [c for c in containers if c.spec.gpu == gpu]
            held = self._held(handle, mine)
            for c in mine:
                pids = held.get(c.name, {})
                if self.unattached and len(pids) > _attached(c):
                    suspects.add(c.name)
                    self._check_unattached(c, pids)
                cap = c.spec.memory_mib
                if cap is None or sum(pids.values()) <= (cap + self.margin_mib) * MIB:
                    continue
                caught.append(c.name)
                self.escapes += 1
                self._act(c, pids, f"{sum(pids.values()) // MIB} MiB over its cap of {cap} MiB")
        self.suspects = suspects
        self.flagged &= suspects
        return caught

    def _check_unattached(self, c: Container, pids: dict[int, int]) -> None:
        if c.name not in self.suspects or c.name in self.flagged:
            return  # first sight (the library may be attaching), or acted on already
        self.flagged.add(c.name)
        self.unattached_caught += 1
        self._act(c, pids, f"{len(pids)} GPU processes, {_attached(c)} under the limiter")

    def _held(self, handle: Any, containers: list[Container]) -> dict[str, dict[int, int]]:
        import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 (the [node] extra)

        regions = {}
        for c in containers:
            identity = usage_identity(c.region)
            if identity is not None:
                regions[identity] = c.name
        pods = pod_owners({c.region: c.name for c in containers})
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        owners = self.attribution.owners([int(p.pid) for p in procs], regions, pods)
        out: dict[str, dict[int, int]] = {}
        for proc in procs:
            name = owners.get(int(proc.pid))
            if name is not None:
                out.setdefault(name, {})[int(proc.pid)] = int(proc.usedGpuMemory or 0)
        return out

    def _act(self, c: Container, pids: dict[int, int], what: str) -> None:
        reason = f"{c.name}: GPU {c.spec.gpu}: {what}"
        print(f"arkgpu node: backstop ({self.action}): {reason}", file=sys.stderr, flush=True)
        if self.action == "kill":
            for pid in pids:
                if pid not in self.pending:
                    _signal(pid, signal.SIGTERM)
                    self.pending[pid] = time.monotonic() + self.grace_s
        elif self.action == "evict":
            (c.region / EVICT_FILE).write_text(reason + "\n", encoding="utf-8")

    def _finish_kills(self) -> None:
        now = time.monotonic()
        for pid, when in list(self.pending.items()):
            if not _alive(pid):
                del self.pending[pid]
            elif now >= when:
                _signal(pid, signal.SIGKILL)
                del self.pending[pid]


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _attached(c: Container) -> int:
    """Processes the container's usage file shows attached to the library (0: unreadable)."""
    try:
        return len(read_usage(c.region).processes)
    except (OSError, ValueError):
        return 0


def open_backstop(
    action: str, margin_mib: int, grace_s: float, gpus: list[int], unattached: bool = True
) -> Backstop:
    """A backstop over NVML's handles of ``gpus`` (NVML stays initialised)."""
    return Backstop(action, margin_mib, grace_s, nvml_handles(gpus), unattached=unattached)
