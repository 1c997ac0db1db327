"""Child processes of the test control plane: started in their own process group, always reaped.

Each process writes its output to a log file; a process that dies while the
tests wait for it raises with the tail of its log. Children also receive
SIGKILL when the test runner dies (``setpriv --pdeathsig``, util-linux), so a
killed pytest leaves no etcd or API server behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_BYTES = 4000
"""How much of a process's log an error message quotes (bytes): the last lines say why it died."""


class ControlPlaneError(RuntimeError):
    """A control-plane process failed to start or to become ready."""


@dataclass
class Child:
    """One running process and its log."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self) -> str:
        """The end of the process's log, for error messages."""
        data = self.log.read_bytes() if self.log.exists() else b""
        return data[-LOG_TAIL_BYTES:].decode(errors="replace")

    def check_alive(self) -> None:
        """Raises ``ControlPlaneError`` with the log's tail when the process has exited."""
        code = self.popen.poll()
        if code is not None:
            raise ControlPlaneError(
                f"{self.name} exited with {code}; log {self.log}:\n{self.tail()}"
            )


def _die_with_parent(argv: list[str]) -> list[str]:
    """``argv`` run so that it gets SIGKILL when its parent dies (no ``preexec_fn``: threads)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


def start(name: str, argv: list[str], log_dir: Path) -> Child:
    """Starts ``argv`` in a new process group with its output in ``<log_dir>/<name>.log``."""
    log = log_dir / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            _die_with_parent(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Child(name, popen, log)


def stop(child: Child, timeout_s: float) -> None:
    """SIGTERM to the process group, SIGKILL after ``timeout_s``; returns once reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if child.popen.poll() is not None:
            return
        try:
            os.killpg(child.popen.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            continue
    child.popen.wait()


def http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    """Whether a GET of ``url`` answers 200 within a few seconds."""
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
        return False


def wait_until(
    child: Child, ready: Callable[[], bool], what: str, timeout_s: float, poll_s: float = 0.25
) -> float:
    """Polls ``ready`` until true; raises when ``child`` dies or ``timeout_s`` passes.

    Returns the seconds waited (the start-up times the study reports).
    """
    start_t = time.monotonic()
    while True:
        child.check_alive()
        if ready():
            return time.monotonic() - start_t
        if time.monotonic() - start_t > timeout_s:
            raise ControlPlaneError(
                f"{child.name}: {what} not ready after {timeout_s:.0f} s; log {child.log}:\n"
                f"{child.tail()}"
            )
        time.sleep(poll_s)
