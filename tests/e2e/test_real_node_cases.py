"""Issue 32's real-node cases for ArkGPU's device plugin (device-keyed regions, PodResources).

One node and one plugin for the module (``node_arkgpu``: a host process, CDI, the
limiter through ``/etc/ld.so.preload``). Each case asserts the pod's own limits
inside its container (``CUDA_VISIBLE_DEVICES`` and the CUDA memory query through
the fake driver) and on the node (the region whose ``pod.json`` names the pod).
Pods on GPU 0 and GPU 1 get different caps, so a pod given another pod's
assignment, region or limits is seen. The kubelet restarts run last: they
restart the node's kubelet.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .node_arkgpu import serving_arkgpu_plugin
from .node_gpu_pods import (
    MIB,
    REGIONS,
    REPORT,
    apply_all,
    caps_and_share,
    get_pod,
    gpu_container,
    gpu_pod,
    new_namespace,
    region_of,
    report,
    wait_output,
    wait_phase,
)
from .node_images import build_workload_image
from .node_pods import POD_WAIT_S
from .realnode import RealNode

IMAGE = "arkgpu.local/e2e-cuda-cases:test"
POD_PRELOAD = Path("/lib/x86_64-linux-gnu/libz.so.1")
"""The library a pod preloads itself in the ``LD_PRELOAD`` case (in the image; nothing
in it links zlib)."""
OUTAGE_S = 20.0
"""How long kube-apiserver is paused: above the plugin's 10 s read timeout."""
SAME_SECOND_TRIES = 5
"""Pairs created until both carry the same creationTimestamp (1 s resolution)."""


Served = tuple[RealNode, "subprocess.Popen[bytes]"]


@pytest.fixture(scope="module")
def served(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The node with the cases' image and ArkGPU's device plugin serving it (its process)."""
    images = tmp_path_factory.mktemp("images")
    real_node.import_image(build_workload_image(images, IMAGE, (POD_PRELOAD,)))
    with serving_arkgpu_plugin(real_node) as plugin:
        yield real_node, plugin


@pytest.fixture(scope="module")
def node(served: Served) -> RealNode:
    """The node of :func:`served`."""
    return served[0]


@pytest.fixture
def namespace(node: RealNode) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the case."""
    name = new_namespace(node)
    yield name
    node.kubectl("delete", "namespace", name, "--wait=false")


def _assert_own(node: RealNode, ns: str, name: str, gpu: int, cap_mib: int, share: int) -> None:
    """The pod's container sees its own GPU and cap; its region has its own limits."""
    seen = report(wait_output(node, ns, name, 2))
    assert seen.visible == node.gpu.uuid(gpu), f"{name}: {seen}"
    assert seen.total_bytes == cap_mib * MIB, f"{name}: {seen}"
    uid = get_pod(node, ns, name)["metadata"]["uid"]
    assert caps_and_share(region_of(uid)[1]) == ((cap_mib * MIB,), share), name


def test_a_rejected_older_pod_leaves_the_younger_its_own_limits(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """The older pod (GPU 1, 2000 MiB) asks for an unsafe sysctl the kubelet does not allow
    and is rejected at admission (Failed, SysctlForbidden) before any Allocate; the younger
    pod of the same size (GPU 0, 3000 MiB) then gets GPU 0, a 3000 MiB cap inside and a
    region of its own limits."""
    older = gpu_pod("older", node, 1, 2000, 2000, IMAGE)
    older["spec"]["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "9999"}]}
    start = len(_plugin_log(node))
    apply_all(node, namespace, [older], tmp_path / "older.json")
    rejected = wait_phase(node, namespace, "older", "Failed")
    assert rejected.get("reason") == "SysctlForbidden", rejected
    assert "allocated " not in _plugin_log(node)[start:], "rejected after its Allocate"
    apply_all(node, namespace, [gpu_pod("younger", node, 0, 3000, 3000, IMAGE)], tmp_path / "y")
    _assert_own(node, namespace, "younger", 0, 3000, 3000)


def test_replicas_created_in_the_same_second_keep_their_own_limits(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """Two pods of the same size created by one apply, in the same second (``rep-b`` first,
    so name order is not creation order) with different caps and shares: each sees its own."""
    for attempt in range(SAME_SECOND_TRIES):
        names = (f"rep-b{attempt}", f"rep-a{attempt}")
        pods = [
            gpu_pod(names[0], node, 0, 2500, 2500, IMAGE),
            gpu_pod(names[1], node, 1, 4500, 4500, IMAGE),
        ]
        apply_all(node, namespace, pods, tmp_path / f"pair{attempt}.json")
        stamps = {get_pod(node, namespace, n)["metadata"]["creationTimestamp"] for n in names}
        if len(stamps) == 1:
            break
        node.kubectl("delete", "pod", *names, "-n", namespace, "--wait=false")
    else:
        pytest.fail(f"no pair created in one second in {SAME_SECOND_TRIES} tries")
    _assert_own(node, namespace, names[0], 0, 2500, 2500)
    _assert_own(node, namespace, names[1], 1, 4500, 4500)


def test_a_gpu_init_container_and_the_app_container_both_see_the_pods_limits(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """The kubelet allocates the init container's device first and reuses it for the app
    container: both report GPU 1 and the pod's 3500 MiB cap."""
    pod = gpu_pod("initc", node, 1, 3500, 4000, IMAGE)
    pod["spec"]["initContainers"] = [gpu_container("init", REPORT, IMAGE)]
    apply_all(node, namespace, [pod], tmp_path / "initc.json")
    _assert_own(node, namespace, "initc", 1, 3500, 4000)
    init = report(wait_output(node, namespace, "initc", 2, container="init"))
    assert init.visible == node.gpu.uuid(1)
    assert init.total_bytes == 3500 * MIB


def test_a_pods_own_ld_preload_is_loaded_beside_the_limiter(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """A pod that sets ``LD_PRELOAD`` to zlib: its shell maps both zlib and the limiter's
    library (``/proc/self/maps``), and CUDA in it still reports the 2200 MiB cap."""
    maps = (
        'while read -r line; do case "$line" in *libz.so*|*libarkgpu_limiter*)'
        ' echo "${line##* }";; esac; done < /proc/self/maps'
    )
    pod = gpu_pod("preload", node, 0, 2200, 3000, IMAGE)
    main = pod["spec"]["containers"][0]
    main["env"] = [{"name": "LD_PRELOAD", "value": str(POD_PRELOAD)}]
    main["command"][-1] = f"{REPORT}; {maps}; exec sleep 600"
    apply_all(node, namespace, [pod], tmp_path / "preload.json")
    _assert_own(node, namespace, "preload", 0, 2200, 3000)
    mapped = {Path(p).name for p in wait_output(node, namespace, "preload", 4)[2:]}
    assert POD_PRELOAD.name in mapped, mapped
    assert "libarkgpu_limiter.so" in mapped, mapped


def _plugin_log(node: RealNode) -> str:
    return (node.paths.logs / "device-plugin.log").read_text(errors="replace")


def test_a_pod_admitted_during_an_api_server_outage_starts_with_its_limits(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """kube-apiserver is paused (SIGSTOP) for 20 s as soon as the plugin has answered the
    pod's Allocate: PreStartContainer cannot read the pod, refuses, and the kubelet tries
    again; once the API server is back the pod runs with its own GPU and 3300 MiB cap."""
    apiserver = node.plane.apiserver
    assert apiserver is not None
    start = len(_plugin_log(node))
    apply_all(node, namespace, [gpu_pod("outage", node, 1, 3300, 3000, IMAGE)], tmp_path / "o")
    deadline = time.monotonic() + POD_WAIT_S
    while "allocated " not in _plugin_log(node)[start:]:
        assert time.monotonic() < deadline, _plugin_log(node)[start:]
        time.sleep(0.05)
    os.killpg(apiserver.popen.pid, signal.SIGSTOP)
    try:
        time.sleep(OUTAGE_S)
        during = _plugin_log(node)[start:]
    finally:
        os.killpg(apiserver.popen.pid, signal.SIGCONT)
    assert "arkgpu device plugin: " in during, f"no PreStartContainer refused:\n{during}"
    _assert_own(node, namespace, "outage", 1, 3300, 3000)


def _restarted_and_running(node: RealNode, namespace: str, name: str) -> bool:
    """Whether the pod's container runs again after one or more exits."""
    statuses = get_pod(node, namespace, name)["status"].get("containerStatuses") or [{}]
    return statuses[0].get("restartCount", 0) >= 1 and "running" in statuses[0].get("state", {})


def _registrations(node: RealNode) -> int:
    return _plugin_log(node).count("registered nvidia.com/gpu with the kubelet")


def test_after_a_kubelet_restart_with_the_regions_gone_containers_get_them_back(
    node: RealNode, namespace: str, tmp_path: Path
) -> None:
    """As after a reboot: with the kubelet stopped, every region is removed. Once the kubelet
    is back and the plugin registered again, the pod's container exits (a file in a hostPath
    says when) and the kubelet starts it again from its checkpoint, with no Allocate:
    PreStartContainer rebuilds the region and the new run sees the 2800 MiB cap again; a pod
    created after the restart starts with its own limits. (Before the plugin registers again
    the kubelet skips PreStartContainer: see docs/studies/real-node.md.)"""
    trigger = tmp_path / "trigger"
    trigger.mkdir()
    pod = gpu_pod("survivor", node, 0, 2800, 3000, IMAGE)
    pod["spec"]["restartPolicy"] = "Always"
    pod["spec"]["volumes"] = [{"name": "t", "hostPath": {"path": str(trigger)}}]
    main = pod["spec"]["containers"][0]
    main["volumeMounts"] = [{"name": "t", "mountPath": "/trigger"}]
    main["command"][-1] = (
        f"{REPORT}; if [ -e /trigger/go ]; then exec sleep 600; fi;"
        " while [ ! -e /trigger/go ]; do sleep 0.5; done"
    )
    apply_all(node, namespace, [pod], tmp_path / "survivor.json")
    _assert_own(node, namespace, "survivor", 0, 2800, 3000)
    before = _registrations(node)

    def remove_regions() -> None:
        for folder in REGIONS.iterdir():
            shutil.rmtree(folder)

    node.kubelet.restart(remove_regions)
    deadline = time.monotonic() + POD_WAIT_S
    while _registrations(node) <= before:
        assert time.monotonic() < deadline, "the plugin did not register with the new kubelet"
        time.sleep(0.5)
    (trigger / "go").touch()
    while not _restarted_and_running(node, namespace, "survivor"):
        assert time.monotonic() < deadline, get_pod(node, namespace, "survivor")["status"]
        time.sleep(0.5)
    try:
        _assert_own(node, namespace, "survivor", 0, 2800, 3000)
        newcomer = gpu_pod("newcomer", node, 1, 1800, 2000, IMAGE)
        apply_all(node, namespace, [newcomer], tmp_path / "newcomer.json")
        _assert_own(node, namespace, "newcomer", 1, 1800, 2000)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe plugin's log:\n{_plugin_log(node)[-4000:]}") from None


def _restarts(node: RealNode, namespace: str, name: str) -> tuple[int, bool]:
    """The pod's container's restart count, and whether it runs."""
    statuses = get_pod(node, namespace, name)["status"].get("containerStatuses") or [{}]
    return statuses[0].get("restartCount", 0), "running" in statuses[0].get("state", {})


def _wait(probe: Callable[[], object], what: Callable[[], str], bound_s: float = 60.0) -> None:
    """Until ``probe()``; ``what()`` says why when ``bound_s`` (the test's 300 s timeout
    holds several such waits) passes."""
    deadline = time.monotonic() + bound_s
    while not probe():
        assert time.monotonic() < deadline, what()
        time.sleep(0.5)


def _state(node: RealNode, namespace: str, name: str) -> str:
    """The pod's status and events, for a failure's message."""
    status = get_pod(node, namespace, name)["status"]
    events = node.kubectl("get", "events", "-n", namespace, "-o", "wide")
    log = node.paths.logs / f"kubelet-{node.kubelet.restarts}.log"
    lines = [x for x in log.read_text().splitlines() if name in x or "devicemanager" in x]
    kubelet = "\n".join(x[:400] for x in lines[-25:])
    plugin = _plugin_log(node)[-2500:]
    return f"status: {status}\nevents:\n{events[-3000:]}\nkubelet:\n{kubelet}\nplugin:\n{plugin}"


ADMITTED_MARGIN_S = 5.0
"""After the restarted kubelet's pod manager has a pod, the wait before its container may
exit: admission follows in the same goroutine (milliseconds), and a container that is not
running at admission is re-allocated, which fails while the plugin is not registered
(``no healthy devices present``: the pod is rejected, as at a node reboot)."""


def _kubelet_has(node: RealNode, name: str) -> bool:
    """Whether the kubelet's pod manager has the pod (its ``/pods``, through the API server)."""
    try:
        listed = json.loads(node.kubectl("get", "--raw", f"/api/v1/nodes/{node.name}/proxy/pods"))
    except Exception:  # the kubelet is not serving yet
        return False
    return any(p["metadata"]["name"] == name for p in listed.get("items") or [])


def _remove_regions() -> None:
    for folder in REGIONS.iterdir():
        shutil.rmtree(folder)


def _rebuilt(uid: str) -> bool:
    try:
        return caps_and_share(region_of(uid)[1]) == ((1800 * MIB,), 2000)
    except AssertionError:  # not there yet
        return False


def test_a_container_started_before_the_plugin_registers_again_gets_its_region_from_a_scan(
    served: Served, namespace: str, tmp_path: Path
) -> None:
    """kubelet 1.37.2 skips PreStartContainer until the plugin registers again after its
    restart. The plugin paused (SIGSTOP) across a kubelet restart that removes the regions
    (as a reboot does): once the kubelet has admitted the running pod again, the pod's
    container exits and the kubelet starts it again in that window, with no
    PreStartContainer (a container not running at that admission would be rejected: the
    kubelet allocates again and finds no registered devices). Once the plugin runs again,
    a scan rebuilds the region from the kubelet's PodResources, with the pod's own limits,
    while that run of the container goes on (no start since: no PreStartContainer did it);
    the next run sees its cap."""
    node, plugin = served
    trigger = tmp_path / "trigger"
    trigger.mkdir()
    pod = gpu_pod("window", node, 1, 1800, 2000, IMAGE)
    pod["spec"]["restartPolicy"] = "Always"
    pod["spec"]["volumes"] = [{"name": "t", "hostPath": {"path": str(trigger)}}]
    main = pod["spec"]["containers"][0]
    main["volumeMounts"] = [{"name": "t", "mountPath": "/trigger"}]
    main["command"][-1] = (
        f"{REPORT}; if [ -e /trigger/again ]; then exec sleep 600; fi;"
        " if [ -e /trigger/go ]; then while [ ! -e /trigger/again ]; do sleep 0.5; done; exit 0;"
        " fi; while [ ! -e /trigger/go ]; do sleep 0.5; done"
    )
    apply_all(node, namespace, [pod], tmp_path / "window.json")
    _assert_own(node, namespace, "window", 1, 1800, 2000)
    uid = get_pod(node, namespace, "window")["metadata"]["uid"]
    os.kill(plugin.pid, signal.SIGSTOP)
    try:
        node.kubelet.restart(_remove_regions)
        _wait(lambda: _kubelet_has(node, "window"), lambda: "the kubelet never had the pod")
        time.sleep(ADMITTED_MARGIN_S)
        (trigger / "go").touch()
        _wait(
            lambda: _restarts(node, namespace, "window") == (1, True),
            lambda: f"no start in the window: {_state(node, namespace, 'window')}",
        )
    finally:
        os.kill(plugin.pid, signal.SIGCONT)
    try:
        _wait(lambda: _rebuilt(uid), lambda: "the region was not rebuilt")
        assert _restarts(node, namespace, "window") == (1, True)
        assert "rebuilt (started without PreStartContainer)" in _plugin_log(node)
        (trigger / "again").touch()
        _wait(
            lambda: _restarts(node, namespace, "window") == (2, True),
            lambda: f"no third run: {_state(node, namespace, 'window')}",
        )
        _assert_own(node, namespace, "window", 1, 1800, 2000)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe plugin's log:\n{_plugin_log(node)[-4000:]}") from None
