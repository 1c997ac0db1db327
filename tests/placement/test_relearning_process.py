"""Re-learning in a worker process: the same result as on a thread, and a worker that dies
or is stopped leaves neither a broken policy nor a process behind."""

from __future__ import annotations

import dataclasses
import operator
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.arkgpu_learning import Learned, relearn_task
from arkgpu.placement.relearning_process import ProcessConfig, ProcessSolver

pytestmark = pytest.mark.timeout(240)

NODES = [
    Node(f"n{i}", 64000, 1 << 18, 8 if i % 3 else 4, "A100-80GB" if i % 2 else "V100")
    for i in range(24)
]


def _pods(count: int, seed: int = 0) -> list[Pod]:
    """Shares of 10-50% (some naming a GPU model), whole GPUs and CPU-only pods."""
    rng = np.random.default_rng(seed)
    pods = []
    for i in range(count):
        kind = rng.random()
        spec = frozenset({"V100"}) if rng.random() < 0.2 else frozenset()
        if kind < 0.6:
            milli = int(rng.choice([100, 200, 250, 300, 450, 500]))
            pods.append(Pod(f"p{i}", 1000, 2048, 1, milli, gpu_spec=spec))
        elif kind < 0.9:
            pods.append(Pod(f"p{i}", 2000, 4096, int(rng.choice([1, 2])), 1000, gpu_spec=spec))
        else:
            pods.append(Pod(f"p{i}", 4000, 8192, 0, 0))
    return pods


def _run(policy: ArkgpuPolicy, state: ClusterState, pods: list[Pod]) -> list[Assignment | None]:
    rng = np.random.default_rng(0)
    out = []
    for pod in pods:
        where = policy.choose(state, pod, rng)
        if where is not None:
            state.place(pod, where)
        out.append(where)
    return out


def assert_same(expected: Any, got: Any, path: str = "learned") -> None:
    """Equal to the bit: same types, array dtypes, shapes and values, dict key order."""
    assert type(got) is type(expected), path
    if isinstance(expected, np.ndarray):
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape), path
        assert np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"), path
    elif dataclasses.is_dataclass(expected):
        for f in dataclasses.fields(expected):
            assert_same(getattr(expected, f.name), getattr(got, f.name), f"{path}.{f.name}")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), path
        for key, value in expected.items():
            assert_same(value, got[key], f"{path}[{key!r}]")
    elif isinstance(expected, list | tuple):
        assert len(got) == len(expected), path
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            assert_same(e, g, f"{path}[{i}]")
    else:
        assert got == expected, path


@pytest.fixture
def solver() -> Iterator[ProcessSolver[Any]]:
    """A process solver, closed after the test."""
    made = ProcessSolver[Any]()
    yield made
    made.close()


def _gone(pid: int) -> bool:
    """No such process (exited and reaped)."""
    return not Path(f"/proc/{pid}").exists()


def _until(probe: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_worker_process_learns_exactly_what_a_thread_learns(solver: ProcessSolver[Any]) -> None:
    """One snapshot (two GPU models, shares naming a model, prices on): the Learned that comes
    back from the worker process equals the one computed here, array for array."""
    state = ClusterState.from_nodes(NODES)
    policy = ArkgpuPolicy(state, ArkgpuConfig(relearn_every=1 << 30))
    _run(policy, state, _pods(150))
    task = relearn_task(state, policy.learner, policy.values, policy.config.popularity, True)
    expected = task()
    assert expected.prices is not None
    assert expected.scarcity.weights.size > 0
    solver.submit(task, 150)
    solver.wait()
    got = solver.ready(150)
    assert isinstance(got, Learned)
    assert got is not expected
    assert_same(expected, got)
    assert solver.ready(151) is None


class _WaitingProcessSolver(ProcessSolver[Learned]):
    """Waits for each task, so its result is used at once: inline, through the process."""

    def submit(self, task: Callable[[], Learned], arrivals: int) -> None:
        super().submit(task, arrivals)
        self.wait()


def test_a_policy_relearning_in_a_process_places_every_pod_as_inline() -> None:
    """With each result used as soon as it exists (as inline), 300 pods go exactly where the
    inline policy puts them: GPU slots included, 20 re-learnings with prices."""
    config = ArkgpuConfig(relearn_every=12, warmup=4)
    pods = _pods(300, seed=1)
    inline_state = ClusterState.from_nodes(NODES)
    inline = _run(ArkgpuPolicy(inline_state, config), inline_state, pods)
    worker = _WaitingProcessSolver()
    try:
        state = ClusterState.from_nodes(NODES)
        placed = _run(ArkgpuPolicy(state, config, worker), state, pods)
    finally:
        worker.close()
    assert placed == inline
    assert sum(p is not None for p in placed) > 200
    assert (state.gpu_left == inline_state.gpu_left).all()


def test_a_killed_worker_is_reaped_counted_and_replaced(solver: ProcessSolver[Any]) -> None:
    """SIGKILL between tasks: the next task finds the worker gone, runs on a new one and
    returns its result; the loss is counted once and the dead worker is no zombie."""
    lost: list[int] = []
    solver.on_lost = lambda: lost.append(1)
    solver.submit(partial(operator.add, 1, 2), 1)
    solver.wait()
    assert solver.ready(1) == 3
    dead = solver.pid
    os.kill(dead, signal.SIGKILL)
    solver.submit(partial(operator.mul, 6, 7), 2)
    solver.wait()
    assert solver.ready(2) == 42
    assert (solver.lost, lost) == (1, [1])
    assert solver.pid != dead
    assert _gone(dead)


def test_a_worker_killed_mid_task_leaves_the_last_result_in_place() -> None:
    """A worker killed while it runs a task: the result handed out before stays the last one,
    ``ready`` says nothing new, and the task is run again on a new worker."""
    solver = ProcessSolver[Any]()
    try:
        solver.submit(partial(operator.add, 1, 2), 1)
        solver.wait()
        assert solver.ready(1) == 3
        first = solver.pid
        solver.submit(partial(time.sleep, 0.5), 2)  # returns None: "nothing new"
        time.sleep(0.1)
        os.kill(first, signal.SIGKILL)
        solver.wait()
        assert solver.ready(3) is None
        assert (solver.lost, solver.pid != first) == (1, True)
        assert _gone(first)
        solver.submit(partial(operator.add, 2, 2), 4)
        solver.wait()
        assert solver.ready(4) == 4
    finally:
        solver.close()


def test_a_task_error_is_raised_on_the_caller(solver: ProcessSolver[Any]) -> None:
    """A task that fails in the worker: its error, not a lost worker."""
    solver.submit(partial(int, "not a number"), 1)
    with pytest.raises(ValueError, match="not a number"):
        solver.wait()
    assert solver.lost == 0


def test_close_stops_the_worker_even_mid_task() -> None:
    """close() while the worker runs a 60 s task: returns within seconds, nothing left."""
    solver = ProcessSolver[Any](ProcessConfig(stop_timeout_s=5.0))
    solver.submit(partial(time.sleep, 60), 1)
    pid = solver.pid
    started = time.monotonic()
    solver.close()
    assert time.monotonic() - started < 30
    assert _gone(pid)
    assert solver.lost == 0


def test_a_policy_keeps_its_prices_while_its_worker_is_dead() -> None:
    """Prices learned, then the worker killed: pods go on being placed with the same prices
    until the re-learning due next has been run by a new worker; then the new ones apply."""
    state = ClusterState.from_nodes(NODES)
    worker = ProcessSolver[Learned]()
    policy = ArkgpuPolicy(state, ArkgpuConfig(relearn_every=40, warmup=4), worker)
    pods = _pods(200, seed=2)
    try:
        for pod in pods[:60]:
            _run(policy, state, [pod])
            worker.wait()
        prices = dict(policy.values.price)
        assert prices
        os.kill(worker.pid, signal.SIGKILL)
        rest = iter(pods[60:])
        while worker.lost == 0:  # until the next re-learning finds the worker dead
            _run(policy, state, [next(rest)])  # placed or refused, never an error
            assert policy.values.price == prices
            # a re-learning this arrival submitted has ended (on a loaded machine the
            # I/O thread may otherwise notice the dead worker only after the last pod);
            # when it found the worker dead, the same task has run again in a new one
            worker.wait()
        assert policy.values.price == prices
        _run(policy, state, [next(rest)])
        assert worker.lost == 1
        assert policy.values.price != prices
    finally:
        worker.close()


def test_a_caller_that_exits_or_dies_leaves_no_worker(tmp_path: Path) -> None:
    """A process that never calls close() (its worker is stopped at exit) and one killed by
    SIGKILL (its worker reads the end of the pipe and exits): no worker left running."""
    code = (
        "import sys, time\n"
        "from arkgpu.placement.relearning_process import ProcessSolver\n"
        "s = ProcessSolver()\n"
        "print(s.pid, flush=True)\n"
        "if sys.argv[1] == 'hang': time.sleep(600)\n"
    )
    for how in ("exit", "hang"):
        caller = subprocess.Popen(
            [sys.executable, "-c", code, how], stdout=subprocess.PIPE, text=True
        )
        assert caller.stdout is not None
        pid = int(caller.stdout.readline())
        if how == "hang":
            caller.kill()
        assert caller.wait(timeout=120) in (0, -signal.SIGKILL)
        caller.stdout.close()
        if how == "exit":
            assert _gone(pid)
        else:
            assert _until(partial(_ended, pid))


def _ended(pid: int) -> bool:
    return _gone(pid) or _zombie(pid)


def _zombie(pid: int) -> bool:
    """Exited, waiting for its parent (here: whoever adopts an orphan) to reap it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def test_a_hung_worker_is_timed_out_replaced_and_its_task_dropped() -> None:
    """A worker alive but silent past the task timeout: stopped (no zombie), counted as
    lost, replaced; the hung task is not run again and the next task is answered."""
    solver = ProcessSolver[Any](ProcessConfig(task_timeout_s=1.0))
    try:
        hung = solver.pid
        started = time.monotonic()
        solver.submit(partial(time.sleep, 600), 1)
        solver.wait()
        assert time.monotonic() - started < 60  # not the task's 600 s
        assert solver.ready(1) is None
        assert (solver.lost, solver.pid != hung) == (1, True)
        assert _gone(hung)
        solver.submit(partial(operator.add, 2, 3), 2)
        solver.wait()
        assert solver.ready(2) == 5
    finally:
        solver.close()
