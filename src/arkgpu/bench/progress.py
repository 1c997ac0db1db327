"""Progress of long runs, for people: a bar on a terminal, a line every few seconds otherwise.

A bench loop makes one :class:`ProgressReporter` and calls :meth:`advance`
after each unit of work (a seed, a mode, a policy run); the reporter decides
how to show it. On a terminal it is a rich bar with the elapsed and remaining
time; elsewhere (CI logs, a pipe) it writes a plain line when a step ends, at
most every ``interval_s``, and a "still running" line every ``interval_s``
while a long step has not ended, so that a log never goes quiet for long.
Everything goes to standard error, so standard output stays clean for tables
and JSON.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@dataclass(frozen=True)
class ProgressConfig:
    """How progress is shown."""

    interval_s: float = 5.0
    """Seconds between plain lines when standard error is not a terminal (default 5 s):
    often enough that a log shows the run is alive, rarely enough to stay readable.
    0 prints a line at every step and no "still running" line."""
    bar: bool | None = None
    """Force the terminal bar (True) or the plain lines (False); None: bar on a terminal."""


def format_duration(seconds: float) -> str:
    """``0.4 s``, ``12 s``, ``1 min 32 s``, ``2 h 05 min``: a duration as people read it."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class ProgressReporter:
    """Shows the progress of ``total`` steps of work called ``label`` (see the module doc)."""

    def __init__(
        self,
        label: str,
        total: int,
        config: ProgressConfig | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.label, self.total = label, total
        self.config = config or ProgressConfig()
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.detail = ""
        self._start = time.monotonic()
        self._last_line = self._start
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._heartbeat: threading.Thread | None = None

    def __enter__(self) -> ProgressReporter:
        use_bar = self.config.bar
        if use_bar is None:
            use_bar = self.stream.isatty()
        if use_bar:
            self._bar = _make_bar(self.stream)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        else:
            self._line(f"{self.label}: {self.total} steps")
            if self.config.interval_s > 0:
                self._heartbeat = threading.Thread(target=self._beat, daemon=True)
                self._heartbeat.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        if self._bar is not None:
            self._bar.stop()
        if kind is None:
            self._line(f"{self.label}: {self.done}/{self.total} done in {self.elapsed()}")

    def elapsed(self) -> str:
        """Time since the reporter started, in human units."""
        return format_duration(time.monotonic() - self._start)

    def advance(self, detail: str = "", steps: int = 1) -> None:
        """Record ``steps`` finished steps; ``detail`` names the last one (``fgd seed 42``)."""
        with self._lock:
            self.done = min(self.done + steps, self.total)
            self.detail = detail
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, description=self._describe())
            return
        now = time.monotonic()
        if now - self._last_line >= self.config.interval_s or self.done == self.total:
            self._line(self._status())

    def note(self, detail: str) -> None:
        """Say what is running now without finishing a step (shown with the next line or bar)."""
        with self._lock:
            self.detail = detail
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=self._describe())

    def _describe(self) -> str:
        return f"{self.label}: {self.detail}" if self.detail else self.label

    def _status(self) -> str:
        percent = 100 * self.done / self.total if self.total else 100.0
        last = f", last: {self.detail}" if self.detail else ""
        return (
            f"{self.label}: {self.done}/{self.total} ({percent:.0f}%), "
            f"{self.elapsed()} elapsed{last}"
        )

    def _beat(self) -> None:
        """Plain mode: a line whenever ``interval_s`` passed without one."""
        while not self._stop.wait(self.config.interval_s / 2):
            if time.monotonic() - self._last_line >= self.config.interval_s:
                self._line(self._status() + " (running)")

    def _line(self, text: str) -> None:
        with self._lock:
            self._last_line = time.monotonic()
            print(text, file=self.stream, flush=True)


def _make_bar(stream: TextIO) -> Progress:
    """A rich bar: label, bar, n/m, elapsed, remaining."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(file=stream),
        transient=True,
    )
