"""When the ``arkgpu`` policy's re-learned measures take effect.

Re-learning rebuilds the typical shapes, the per-node fragmentation tables,
the scarcity weights and the share prices (a cutting-stock LP): 20 to 100 ms
on the 2-core machine, every few hundred GPU pods. Inline, that time lands on
one decision. A solver runs a re-learning task (a snapshot of what was seen,
taken between decisions) and says when its result may be used:

- :class:`LaggedSolver` runs it at once, on the caller's thread, and hands the
  result over after ``lag`` more GPU-pod arrivals. ``lag=0`` is the inline
  behaviour; a positive lag reproduces, deterministically, a request path that
  keeps the old measures while the new ones are computed elsewhere.
- :class:`BackgroundSolver` runs it on one worker thread; decisions go on with
  what they have and pick the result up at the first decision after the task
  ends. Placements then depend on timing, so the simulator's figures use
  :class:`LaggedSolver`; this one is for a long-running scheduler.
- :class:`~arkgpu.placement.relearning_process.ProcessSolver` does the same in
  a worker process: a thread still shares the
  interpreter lock with the decisions, and a decision that waits for it while
  the task runs is slower by milliseconds; a process shares nothing.

Either way the policy installs results on its own thread, between decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Solver(Protocol[T]):
    """Runs re-learning tasks and says when a result may be used."""

    def submit(self, task: Callable[[], T], arrivals: int) -> None:
        """Run ``task``, a snapshot taken at ``arrivals`` GPU pods."""

    def ready(self, arrivals: int) -> T | None:
        """The newest result that may be used after ``arrivals`` GPU pods, once."""


class LaggedSolver(Generic[T]):
    """Run on submit; release the result ``lag`` GPU-pod arrivals later (module docstring)."""

    def __init__(self, lag: int = 0) -> None:
        if lag < 0:
            raise ValueError(f"re-learning lag must be >= 0 GPU pods, got {lag}")
        self.lag = lag
        self._pending: list[tuple[int, T]] = []

    def submit(self, task: Callable[[], T], arrivals: int) -> None:
        """Run ``task`` now; keep the result until ``arrivals + lag``."""
        self._pending.append((arrivals + self.lag, task()))

    def ready(self, arrivals: int) -> T | None:
        """The newest result whose time has come; older ones are dropped."""
        if not self._pending:
            return None
        due = [result for at, result in self._pending if at <= arrivals]
        self._pending = [(at, result) for at, result in self._pending if at > arrivals]
        return due[-1] if due else None


class BackgroundSolver(Generic[T]):
    """Run tasks on one worker thread; at most one runs, the newest waiting one is kept.

    A task submitted while another runs replaces any older waiting task, so a
    slow re-learning never builds a queue. Call :meth:`close` when done.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arkgpu-relearn")
        self._running: Future[T] | None = None
        self._waiting: Callable[[], T] | None = None
        self._latest: T | None = None

    def submit(self, task: Callable[[], T], arrivals: int) -> None:
        """Start ``task``, or keep it (in place of any older one) behind the running one."""
        self._advance()
        if self._running is None:
            self._running = self._pool.submit(task)
        else:
            self._waiting = task

    def ready(self, arrivals: int) -> T | None:
        """The newest finished result not handed out yet (a task's error is raised here; a
        task that returned None leaves the one before it in place)."""
        self._advance()
        latest, self._latest = self._latest, None
        return latest

    def wait(self) -> None:
        """Block until no task runs or waits (for tests and an orderly shutdown)."""
        while self._running is not None:
            wait([self._running])
            self._advance()

    def close(self) -> None:
        """Stop the worker thread after the running task."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _advance(self) -> None:
        if self._running is None or not self._running.done():
            return
        result = self._running.result()
        self._running = None
        if result is not None:
            self._latest = result
        if self._waiting is not None:
            task, self._waiting = self._waiting, None
            self._running = self._pool.submit(task)
