"""Re-learning in a worker process: :class:`ProcessSolver`.

A re-learning task (:class:`~arkgpu.placement.arkgpu_learning.RelearnTask`)
is pickled on the caller's thread when it is submitted, between two
decisions: the pickle is the snapshot. One I/O thread
(:class:`~arkgpu.placement.relearning.BackgroundSolver`, so at most one task
runs and only the newest waiting one is kept) writes it to the worker process
and waits, without the interpreter lock, for the pickled result. The worker
process computes exactly what the task computes on a thread; the caller's
interpreter lock is held only to pickle the snapshot (a fraction of a
millisecond at 1,000 nodes) and to unpickle the result.

The worker is a fresh interpreter started by :mod:`subprocess` (about a second
of imports, once), not a ``fork`` of the caller: the caller has threads (an
HTTP server's, the watches'), and a forked copy of a threaded process may
inherit a lock some other thread held. Nor is it started by
:mod:`multiprocessing`'s ``spawn`` or ``forkserver``, which import the
caller's ``__main__`` script in the worker. When the worker
dies (killed, out of memory), the task it had is run once more on a new
worker; a worker that hangs (alive, no answer within
:attr:`ProcessConfig.task_timeout_s`) is stopped and replaced and its task
dropped; until a result comes the policy decides with what it learned last.
Each death is logged and counted (:attr:`ProcessSolver.lost`, and the
``on_lost`` callback). :meth:`ProcessSolver.close` stops the worker and waits
for it; an interpreter that exits without calling it stops the worker too
(a daemon process), and a worker whose caller was killed reads the end of its
pipe and exits.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from arkgpu.placement.relearning import BackgroundSolver

T = TypeVar("T")

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProcessConfig:
    """How :class:`ProcessSolver` starts and stops its worker process."""

    preload: tuple[str, ...] = ("arkgpu.placement.arkgpu_learning",)
    """Modules the worker imports as it starts, before any task comes (default: the
    re-learning code, with numpy and scipy), so that the first task does not wait for them."""
    niceness: int = 10
    """Added to the worker's nice value as it starts (default 10; 0 keeps the caller's):
    on a machine with few cores the worker's LPs then give way to the caller's request
    threads, which are what is waited for; a re-learning late by a few ms costs nothing."""
    stop_timeout_s: float = 5.0
    """Seconds :meth:`ProcessSolver.close` waits for the worker after SIGTERM before it
    sends SIGKILL (default 5: a worker exits on SIGTERM at once, even mid-task)."""
    start_timeout_s: float = 300.0
    """Seconds a new worker may take to import :attr:`preload` before it counts as hung
    (default 300: numpy and scipy take about a second, much longer on a loaded machine)."""
    task_timeout_s: float = 120.0
    """Seconds a task may run before its worker counts as hung: it is stopped (SIGTERM, then
    SIGKILL), counted as lost and replaced, and the task is dropped (run again it might hang
    again); the policy keeps what it learned last (default 120: a re-learning takes 20 to
    130 ms at 1,000 nodes on the 2-core machine, a few seconds at 5,000 under load)."""


class WorkerLostError(RuntimeError):
    """The worker process ended, or hung, before it answered."""

    def __init__(self, message: str, hung: bool = False) -> None:
        super().__init__(message)
        self.hung = hung
        """The worker was alive but gave no answer within the task timeout."""


def main(argv: list[str]) -> None:
    """The worker process (``argv``: the pipe's file descriptor, the niceness to add, then
    modules to import): run each task received until the pipe closes. A task's error goes
    back to the caller; the caller decides when this ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[0]))
    os.nice(int(argv[1]))
    for name in argv[2:]:
        importlib.import_module(name)
    conn.send_bytes(READY)
    while True:
        try:
            data = conn.recv_bytes()
            conn.send_bytes(_answer(data))
        except (EOFError, OSError):  # the caller closed its end, or exited
            return


def _answer(data: bytes) -> bytes:
    """``(True, result)`` or ``(False, error)``, pickled."""
    try:
        reply: tuple[bool, object] = (True, pickle.loads(data)())  # our own pipe
    except Exception as exc:  # (any error of the task goes back to the caller)
        reply = (False, exc)
    try:
        return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # (an error or result that cannot be pickled)
        return pickle.dumps((False, RuntimeError(f"re-learning worker: {exc!r}")))


READY = b"ready"
"""What the worker sends once its modules are imported: the task timeout starts after it."""
WORKER_CODE = "import sys; from arkgpu.placement.relearning_process import main; main(sys.argv[1:])"
"""What the worker's interpreter runs (``python -c``)."""


class Worker:
    """One worker process (a fresh interpreter, started by :mod:`subprocess`: no ``fork``
    of the caller, and none of the caller's ``__main__``) and the caller's end of its pipe."""

    def __init__(self, config: ProcessConfig) -> None:
        self._conn, child = multiprocessing.Pipe()
        fd = child.fileno()
        self.process = subprocess.Popen(  # our interpreter, our code
            [sys.executable, "-c", WORKER_CODE, str(fd), str(config.niceness), *config.preload],
            pass_fds=[fd],
            env={**os.environ, "PYTHONPATH": _python_path()},
            stdin=subprocess.DEVNULL,
        )
        child.close()
        self.timeout_s = config.stop_timeout_s
        self.start_timeout_s = config.start_timeout_s
        self._started = False
        self._finalizer = weakref.finalize(self, _stop, self.process, self.timeout_s)

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.process.pid

    def run(self, data: bytes, timeout_s: float) -> tuple[bool, object]:
        """Send a pickled task, wait up to ``timeout_s`` for the answer (WorkerLostError if
        the worker ended, or hung: no answer in time)."""
        try:
            if not self._started:
                self._receive(self.start_timeout_s)  # READY: its imports are done
                self._started = True
            self._conn.send_bytes(data)
            answer: tuple[bool, object] = self._receive(timeout_s)
        except (EOFError, OSError) as exc:
            raise WorkerLostError(f"re-learning worker {self.pid} ended") from exc
        return answer

    def _receive(self, timeout_s: float) -> Any:
        """The next message, unpickled (READY as it is); WorkerLostError(hung) after
        ``timeout_s`` without one."""
        if not self._conn.poll(timeout_s):
            raise WorkerLostError(
                f"re-learning worker {self.pid} gave no answer in {timeout_s:g} s", hung=True
            )
        data = self._conn.recv_bytes()
        return data if data == READY else pickle.loads(data)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; wait for it (reaped: no zombie)."""
        self._finalizer()

    def close(self) -> None:
        """Close the caller's end of the pipe (after :meth:`stop`, once nothing reads it)."""
        self._conn.close()


def _stop(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM ``process``, SIGKILL after ``timeout_s``, and reap it (also at interpreter exit,
    for a solver never closed)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


def _python_path() -> str:
    """The caller's import path first, so the worker imports the same ``arkgpu``."""
    package = Path(__file__).resolve().parents[2]  # the directory that holds arkgpu/
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(package), rest) if p)


class ProcessSolver(Generic[T]):
    """Run picklable tasks in a worker process, one at a time (module docstring).

    Like :class:`~arkgpu.placement.relearning.BackgroundSolver`: a task
    submitted while another runs replaces any older waiting one, and a result
    is handed out once, at the first :meth:`ready` after it came; a task's
    own error is raised there. ``on_lost`` is called (on the I/O thread) each
    time the worker dies. Call :meth:`close` when done.
    """

    def __init__(
        self, config: ProcessConfig | None = None, on_lost: Callable[[], None] = lambda: None
    ) -> None:
        self.config = config or ProcessConfig()
        self.on_lost = on_lost
        self.lost = 0
        """Worker processes that died before answering."""
        self._lock = threading.Lock()
        self._closing = False
        self._worker = Worker(self.config)
        self._io: BackgroundSolver[T | None] = BackgroundSolver()
        self._io.submit(lambda: None, 0)  # its thread starts now, not on the first decision

    @property
    def pid(self) -> int:
        """The current worker's process id."""
        return self._worker.pid

    def submit(self, task: Callable[[], T], arrivals: int) -> None:
        """Pickle ``task`` now (the snapshot); run it when the worker is free."""
        data = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        self._io.submit(partial(self._remote, data), arrivals)

    def ready(self, arrivals: int) -> T | None:
        """The newest result not handed out yet (a task's error is raised here)."""
        return self._io.ready(arrivals)

    def wait(self) -> None:
        """Block until no task runs or waits (tests, an orderly shutdown)."""
        self._io.wait()

    def close(self) -> None:
        """Stop the worker (a running task is abandoned) and the I/O thread."""
        with self._lock:
            self._closing = True
            worker = self._worker
        worker.stop()
        self._io.close()
        worker.close()

    def _remote(self, data: bytes) -> T | None:
        """On the I/O thread: the task's result; None if the worker died twice, hung (the
        task is dropped) or we close."""
        for _ in range(2):
            worker = self._worker
            try:
                ok, value = worker.run(data, self.config.task_timeout_s)
            except WorkerLostError as exc:
                if not self._replace(worker, exc) or exc.hung:
                    return None
                continue
            if not ok:
                raise value if isinstance(value, BaseException) else RuntimeError(value)
            return cast(T, value)  # what the pickled task returns
        return None

    def _replace(self, dead: Worker, why: WorkerLostError) -> bool:
        """Count and log a dead or hung worker (stopped here) and start another, unless closing
        (then False)."""
        with self._lock:
            if self._closing:
                return False
            dead.stop()  # reaped: no zombie
            self.lost += 1
            LOG.warning(
                "%s (exit code %s); the policy keeps what it learned last; starting a new worker",
                why,
                dead.process.returncode,
            )
            dead.close()
            self._worker = Worker(self.config)
        self.on_lost()
        return True
