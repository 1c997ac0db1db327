"""Progress lines and the estimate of the time left."""

from __future__ import annotations

import io

import pytest

from arkgpu.profiling.progress import BarDisplay, Eta, PlainDisplay, display_for, duration


def test_the_estimate_starts_from_the_plan_and_follows_the_pace() -> None:
    """Before any point: the plan's figures; after points twice as slow: twice the rest."""
    eta = Eta(per_point_s=2.0, startup_left_s=10.0)
    assert eta.left_s(5) == pytest.approx(20.0)
    eta.record(seconds=4.0 + 20.0, startup_s=10.0)  # one point twice as slow, start-up too
    assert eta.startup_left_s == 0.0
    assert eta.left_s(4) == pytest.approx(2.0 * 4 * 2.0)
    assert eta.left_s(0) == 0.0


@pytest.mark.parametrize(
    ("seconds", "text"), [(42.4, "42s"), (185, "3m05s"), (3725, "1h02m"), (0, "0s")]
)
def test_durations_read_as_hours_minutes_seconds(seconds: float, text: str) -> None:
    """Short human durations."""
    assert duration(seconds) == text


def test_plain_lines_say_the_point_the_count_and_the_time_left() -> None:
    """Off a terminal: one line per point, with n/N and 'about ... left'."""
    out = io.StringIO()
    display = display_for(out)
    assert isinstance(display, PlainDisplay)
    display.start(10, 2, 125.0)
    display.point("solo m b1 s1: median 1 ms", 3, 10, 61.0)
    display.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "profile: 10 points, 2 done before; about 2m05s left"
    assert lines[1].startswith("profile: [3/10] solo m b1 s1: median 1 ms; ")
    assert lines[1].endswith("about 1m01s left")


def test_a_terminal_gets_a_bar_with_the_time_left() -> None:
    """On a terminal the display is a progress bar showing n/N and the estimate."""
    from rich.console import Console  # noqa: PLC0415

    out = io.StringIO()
    display = BarDisplay(Console(file=out, force_terminal=True, width=120))
    display.start(10, 0, 100.0)
    display.point("solo m b1 s1", 4, 10, 42.0)
    display.stop()
    text = out.getvalue()
    assert "4/10" in text
    assert "about 42s left" in text
