"""The extender's re-learning worker process: on by default, counted when it dies, stopped
with the extender; and the settings that choose it."""

from __future__ import annotations

import http.client
import os
import signal
from pathlib import Path

import pytest

from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.extender.config import config_from_dict
from arkgpu.k8s.extender.running import Running, start
from arkgpu.placement.arkgpu import ArkgpuPolicy
from arkgpu.placement.relearning import BackgroundSolver
from arkgpu.placement.relearning_process import ProcessSolver

from .helpers import args, binding, config, node, pod, post, started, wait

pytestmark = pytest.mark.timeout(240)


def _solver(running: Running) -> object:
    policy = running.extender.view.scheduler.policy
    assert isinstance(policy, ArkgpuPolicy)
    return policy.solver


def _metrics(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def test_the_extender_relearns_in_a_process_that_close_stops() -> None:
    """Default settings: a worker process runs; Running.close() leaves no process behind.
    ``relearn_worker = "thread"``: the worker thread of before."""
    running = start(config(), MemoryApi(), watching=False)
    solver = _solver(running)
    assert isinstance(solver, ProcessSolver)
    pid = solver.pid
    assert Path(f"/proc/{pid}").exists()
    running.close()
    assert not Path(f"/proc/{pid}").exists()
    threaded = start(config(relearn_worker="thread"), MemoryApi(), watching=False)
    try:
        assert isinstance(_solver(threaded), BackgroundSolver)
    finally:
        threaded.close()


def _schedule(running: Running, api: MemoryApi, name: str) -> None:
    """One pod through filter and bind, as kube-scheduler sends it; it must bind."""
    p = pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10"})
    api.put("pods", p)
    wait(lambda: p["metadata"]["uid"] in running.extender.view.pods, f"{name} seen")
    status, answer = post(running.port, "/filter", args(p, ["n1", "n2", "n3", "n4"]))
    assert status == 200
    assert answer["NodeNames"], answer
    status, answer = post(running.port, "/bind", binding(p, answer["NodeNames"][0]))
    assert (status, answer) == (200, {"Error": ""})


def test_a_killed_worker_is_counted_and_scheduling_goes_on() -> None:
    """SIGKILL the worker after 5 pods: the next 7 filter and bind as before, the re-learning
    due at the 8th GPU pod finds the worker dead, and /metrics counts one lost worker."""
    api = MemoryApi()
    for n in ("n1", "n2", "n3", "n4"):
        api.put("nodes", node(n))
    running = started(api)
    try:
        solver = _solver(running)
        assert isinstance(solver, ProcessSolver)
        for i in range(5):
            _schedule(running, api, f"a{i}")
        dead = solver.pid
        os.kill(dead, signal.SIGKILL)
        for i in range(7):
            _schedule(running, api, f"b{i}")
        wait(lambda: solver.lost == 1, "the lost worker counted")
        assert solver.pid != dead
        text = _metrics(running.port)
        assert "arkgpu_extender_relearn_workers_lost_total 1.0" in text
    finally:
        running.close()


def test_relearning_settings_are_read_and_checked() -> None:
    """``relearn_worker`` is process or thread; ``gc_full_every`` at least 1."""
    assert config_from_dict({}).relearn_worker == "process"
    assert config_from_dict({"relearn_worker": "thread"}).relearn_worker == "thread"
    assert config_from_dict({"gc_full_every": 10}).gc_full_every == 10
    with pytest.raises(ValueError, match="relearn_worker"):
        config_from_dict({"relearn_worker": "fork"}, "x.toml")
    with pytest.raises(ValueError, match="gc_full_every"):
        config_from_dict({"gc_full_every": 0}, "x.toml")
