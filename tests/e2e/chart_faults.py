"""A running GPU container seen from the host, and the chart's parts killed one at a time.

:class:`Running` is what must survive a fault: the container's first process (its pid on
the host, from containerd's task), its region's limits, the interception library it has
mapped (device, inode and a digest of the mapped file, read through
``/proc/<pid>/map_files`` so that a file renamed over it on the host does not count) and
its busy share measured from its region's usage counters.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.limiter.region import Limits, read_limits, read_usage

from .chart_pods import component_pod
from .node_chart import NAMESPACE, Chart, wait_ready
from .node_pods import POD_WAIT_S
from .node_runtime import ctr
from .processes import ControlPlaneError
from .realnode import RealNode, wait_containerd

LIBRARY = "libarkgpu_limiter.so"
PARTS = ("kubelet", "containerd", "device-plugin", "node-runtime", "extender", "webhook")
"""The parts killed one at a time: the node's daemons, then the chart's containers."""
CONTAINER_OF = {
    "device-plugin": ("node", "device-plugin"),
    "node-runtime": ("node", "node-runtime"),
    "extender": ("extender", "extender"),
    "webhook": ("webhook", "webhook"),
}
"""A killed container's component (``app.kubernetes.io/component``) and container name."""
REGISTERED = "registered nvidia.com/gpu with the kubelet"
"""The device plugin's log line when it registered with a kubelet."""


@dataclass(frozen=True)
class Mapping:
    """The library file a process has mapped."""

    device: str
    inode: int
    path: str
    sha256: str


@dataclass(frozen=True)
class Running:
    """A running GPU container as the host sees it."""

    pid: int
    limits: Limits
    library: Mapping


def library_mapping(pid: int) -> Mapping:
    """The interception library ``pid`` has mapped (the first mapping of it)."""
    for line in Path(f"/proc/{pid}/maps").read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5].endswith(LIBRARY):
            data = Path(f"/proc/{pid}/map_files/{fields[0]}").read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            return Mapping(fields[3], int(fields[4]), fields[5], digest)
    raise AssertionError(f"process {pid} has no {LIBRARY} mapped")


def container_id(pod: dict[str, Any], container: str) -> str:
    """The containerd id of ``container`` of ``pod`` (its status's ``containerID``)."""
    for status in pod["status"].get("containerStatuses") or []:
        if status["name"] == container and status.get("containerID"):
            return str(status["containerID"]).split("://", 1)[1]
    raise AssertionError(f"{pod['metadata']['name']}/{container} has no container id")


def restart_count(pod: dict[str, Any], container: str) -> int:
    """How many times the kubelet restarted ``container`` of ``pod``."""
    for status in pod["status"].get("containerStatuses") or []:
        if status["name"] == container:
            return int(status["restartCount"])
    raise AssertionError(f"{pod['metadata']['name']} has no container {container}")


def task_pid(node: RealNode, cid: str) -> int:
    """The host pid of container ``cid``'s first process (``ctr tasks ls``)."""
    for line in ctr(node.paths, "tasks", "ls").splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == cid:
            return int(fields[1])
    raise AssertionError(f"no task of container {cid}")


def kill_task(node: RealNode, cid: str) -> None:
    """SIGKILL to container ``cid``'s process (``ctr tasks kill -s SIGKILL``)."""
    ctr(node.paths, "tasks", "kill", "-s", "SIGKILL", cid)


def running(node: RealNode, pod: dict[str, Any], container: str, region: Path) -> Running:
    """The container's first process, its region's limits and its mapped library."""
    pid = task_pid(node, container_id(pod, container))
    return Running(pid, read_limits(region), library_mapping(pid))


def busy_share(region: Path, seconds: float) -> float:
    """The container's GPU busy time over ``seconds`` of wall time, from its usage file."""
    t0, busy0 = time.monotonic(), sum(read_usage(region).busy_ns)
    time.sleep(seconds)
    t1, busy1 = time.monotonic(), sum(read_usage(region).busy_ns)
    return (busy1 - busy0) / 1e9 / (t1 - t0)


def _registrations(chart: Chart) -> int | None:
    """The device plugin's registrations in its log; None while ``kubectl logs`` cannot
    reach the kubelet (restarting)."""
    pod = component_pod(chart, "node")["metadata"]["name"]
    try:
        log = chart.node.kubectl("logs", "-n", NAMESPACE, pod, "-c", "device-plugin")
    except ControlPlaneError:
        return None
    return log.count(REGISTERED)


def _kill_daemon(chart: Chart, part: str) -> None:
    """SIGKILL kubelet or containerd and start it again; for kubelet, wait until the device
    plugin registered with the new one (before that, the kubelet has no GPUs to give)."""
    node = chart.node
    daemon = node.kubelet if part == "kubelet" else node.containerd
    before = _registrations(chart)
    daemon.kill_and_restart()
    if part == "containerd":
        wait_containerd(node.paths, daemon, POD_WAIT_S)
        return
    deadline = time.monotonic() + POD_WAIT_S
    while _registrations(chart) in (None, before):
        assert time.monotonic() < deadline, "the device plugin did not register again"
        time.sleep(1.0)


def _kill_container(chart: Chart, part: str) -> None:
    """SIGKILL the container's process; wait until the kubelet restarted it."""
    component, container = CONTAINER_OF[part]
    pod = component_pod(chart, component)
    restarts = restart_count(pod, container)
    kill_task(chart.node, container_id(pod, container))
    deadline = time.monotonic() + POD_WAIT_S
    while restart_count(component_pod(chart, component), container) <= restarts:
        assert time.monotonic() < deadline, f"{part} not restarted: {pod['status']}"
        time.sleep(1.0)


def kill(chart: Chart, part: str) -> None:
    """SIGKILL ``part`` (one of :data:`PARTS`) and wait until it is back and every pod of
    the release is Ready."""
    if part in ("kubelet", "containerd"):
        _kill_daemon(chart, part)
    else:
        _kill_container(chart, part)
    wait_ready(chart)
