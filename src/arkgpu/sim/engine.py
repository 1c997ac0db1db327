"""A small discrete-event core: one environment owns the clock, the event heap and ids.

Events are ordered by ``(time, priority, sequence)``: earlier time first, then
lower priority value, then the order in which they were scheduled, so a run is
fully deterministic. A handler is any callable taking no argument; components
keep their state in their own objects and schedule their next event through
the environment they were given (no module-level state, no global clock).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

Handler = Callable[[], None]


class SimulationError(RuntimeError):
    """An event was scheduled in the past or the run was asked to go backwards."""


@dataclass(slots=True)
class _Entry:
    time: float
    handler: Handler
    cancelled: bool = False


class EventHandle:
    """What :meth:`Environment.schedule` returns: lets the caller cancel the event."""

    __slots__ = ("_entry",)

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry

    @property
    def time(self) -> float:
        """Simulated time (s) at which the event fires."""
        return self._entry.time

    def cancel(self) -> None:
        """Drop the event; it will not fire."""
        self._entry.cancelled = True


class Environment:
    """The simulation's clock (seconds), event heap and id counter."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = start_s
        self._heap: list[tuple[float, int, int, _Entry]] = []
        self._sequence = 0
        self._next_id = 0
        self.events_fired = 0
        """Events handled so far (a cost measure for benchmarks)."""

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return self._now

    def new_id(self) -> int:
        """A fresh integer id, unique within this environment."""
        self._next_id += 1
        return self._next_id

    def schedule(self, time_s: float, handler: Handler, priority: int = 0) -> EventHandle:
        """Run ``handler`` at absolute time ``time_s``; lower ``priority`` runs first on ties."""
        if time_s < self._now:
            raise SimulationError(f"event at {time_s} s scheduled in the past (now {self._now} s)")
        self._sequence += 1
        entry = _Entry(time_s, handler)
        heapq.heappush(self._heap, (time_s, priority, self._sequence, entry))
        return EventHandle(entry)

    def peek(self) -> float:
        """Time of the next pending event, or infinity when none is left."""
        while self._heap and self._heap[0][3].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else float("inf")

    def run(self, until_s: float) -> None:
        """Fire every event with time <= ``until_s`` in order, then set the clock to ``until_s``."""
        if until_s < self._now:
            raise SimulationError(f"cannot run back to {until_s} s (now {self._now} s)")
        heap = self._heap
        while heap and heap[0][0] <= until_s:
            entry = heapq.heappop(heap)[3]
            if entry.cancelled:
                continue
            self._now = entry.time
            self.events_fired += 1
            entry.handler()
        self._now = until_s
