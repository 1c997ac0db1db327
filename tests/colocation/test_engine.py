"""The discrete-event core: ordering, cancellation, clock."""

import pytest

from arkgpu.sim.engine import Environment, SimulationError


def test_events_fire_by_time_then_priority_then_schedule_order() -> None:
    """Ties in time go to the lower priority value, then to the earlier scheduled event."""
    env = Environment()
    fired: list[str] = []
    env.schedule(2.0, lambda: fired.append("late"))
    env.schedule(1.0, lambda: fired.append("b-prio1"), priority=1)
    env.schedule(1.0, lambda: fired.append("a-prio0-first"))
    env.schedule(1.0, lambda: fired.append("a-prio0-second"))
    env.run(5.0)
    assert fired == ["a-prio0-first", "a-prio0-second", "b-prio1", "late"]
    assert env.now == 5.0
    assert env.events_fired == 4


def test_cancelled_event_does_not_fire_and_handlers_see_their_time() -> None:
    """A cancelled event is skipped; ``now`` is the event's time inside its handler."""
    env = Environment()
    seen: list[float] = []
    handle = env.schedule(1.0, lambda: seen.append(-1.0))
    env.schedule(3.0, lambda: seen.append(env.now))
    handle.cancel()
    assert env.peek() == 3.0
    env.run(2.0)
    assert seen == []
    env.run(4.0)
    assert seen == [3.0]


def test_past_events_and_running_backwards_are_errors() -> None:
    """The clock never goes back."""
    env = Environment()
    env.run(2.0)
    with pytest.raises(SimulationError):
        env.schedule(1.0, lambda: None)
    with pytest.raises(SimulationError):
        env.run(1.0)


def test_ids_are_unique_per_environment() -> None:
    """Each environment counts its own ids from 1."""
    a, b = Environment(), Environment()
    assert [a.new_id(), a.new_id()] == [1, 2]
    assert b.new_id() == 1
