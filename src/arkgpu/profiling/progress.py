"""Progress of a profiling run and the time it has left.

The estimate of the time left (:class:`Eta`) is the plan's expected time of
the points not done yet (:func:`arkgpu.profiling.plans.estimate_s`'s terms),
scaled by how the points done in this run compared with their expectation
(a machine slower or faster than expected corrects the estimate as it goes).

Two displays: a progress bar with the estimate on a terminal (rich), one
plain line per point otherwise (a log, a pipe, CI).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import IO, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn


@dataclass
class Eta:
    """Expected seconds left, corrected by the pace of the points done so far."""

    per_point_s: float
    """Expected time of one point, s."""
    startup_left_s: float
    """Expected worker start-up time still ahead, s."""
    expected_done_s: float = 0.0
    """Expectation of the points done in this run, s."""
    actual_done_s: float = 0.0
    """Their measured time, s."""

    def record(self, seconds: float, startup_s: float = 0.0) -> None:
        """One more point took ``seconds``, of which ``startup_s`` started workers."""
        self.expected_done_s += self.per_point_s + startup_s
        self.actual_done_s += seconds
        self.startup_left_s = max(0.0, self.startup_left_s - startup_s)

    def left_s(self, points_left: int) -> float:
        """Seconds expected for ``points_left`` more points."""
        pace = self.actual_done_s / self.expected_done_s if self.expected_done_s > 0 else 1.0
        return pace * (points_left * self.per_point_s + self.startup_left_s)


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Display(Protocol):
    """Where progress goes."""

    def start(self, total: int, done: int, left_s: float) -> None:
        """The run begins with ``done`` of ``total`` points already finished."""
        ...

    def point(self, text: str, done: int, total: int, left_s: float) -> None:
        """A point finished; ``text`` says what it measured."""
        ...

    def stop(self) -> None:
        """The run ended."""
        ...


@dataclass
class PlainDisplay:
    """One line per point on ``stream``."""

    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    started: float = field(default_factory=time.monotonic)

    def start(self, total: int, done: int, left_s: float) -> None:
        """Say what is ahead."""
        self._say(f"{total} points, {done} done before; about {duration(left_s)} left")

    def point(self, text: str, done: int, total: int, left_s: float) -> None:
        """Say the point's result and the time left."""
        elapsed = duration(time.monotonic() - self.started)
        self._say(f"[{done}/{total}] {text}; {elapsed} elapsed, about {duration(left_s)} left")

    def stop(self) -> None:
        """Nothing to tidy."""

    def _say(self, text: str) -> None:
        print(f"profile: {text}", file=self.stream, flush=True)


LAST_WIDTH = 60
"""Characters of the last point's text beside the bar (the bar and the estimate keep room)."""


class BarDisplay:
    """A rich progress bar with the last point and the estimate of the time left."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("profile"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("about {task.fields[left]} left"),
            TextColumn("{task.fields[last]}"),
            console=console,
        )
        self.task = self.progress.add_task("profile", total=1, left="?", last="")

    def start(self, total: int, done: int, left_s: float) -> None:
        """Show the bar."""
        self.progress.update(self.task, total=total, completed=done, left=duration(left_s))
        self.progress.start()

    def point(self, text: str, done: int, total: int, left_s: float) -> None:
        """Advance the bar."""
        last = text if len(text) <= LAST_WIDTH else text[: LAST_WIDTH - 1] + "…"
        self.progress.update(self.task, completed=done, left=duration(left_s), last=last)

    def stop(self) -> None:
        """Remove the bar's live display."""
        self.progress.stop()


def display_for(stream: IO[str]) -> Display:
    """A bar on a terminal, plain lines otherwise."""
    console = Console(file=stream)
    return BarDisplay(console) if console.is_terminal else PlainDisplay(stream)
